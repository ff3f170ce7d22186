"""Every touch of ipykernel's and pyzmq's internals sits behind a version check
(:mod:`toh_nb.notebook.kernel_adapter`); these tests fake the versions. The real kernels (ipykernel 6.31,
7.3 and the newest 7.x) are driven in ``test_kernel_routing.py``."""

from __future__ import annotations

import pytest

import toh_nb as tn
from toh_nb.notebook import kernel_adapter, kernel_pump, kernel_routing
from toh_nb.notebook.widget import AgentTree

OUTSIDE = "{} is outside {} to before {}, the versions this is known to work on"

#: what each kind of kernel turns on
KINDS = {
    "ipykernel 6.31": ({"ipykernel": (6, 31, 0), "pyzmq": (27, 3, 0)},
                       {"routing": OUTSIDE.format("ipykernel 6.31.0", "7.4", "8"),
                        "busy_again": OUTSIDE.format("ipykernel 6.31.0", "7.4", "8"), "pump": None}),
    "ipykernel 7.3": ({"ipykernel": (7, 3, 0), "pyzmq": (27, 3, 0)},
                      {"routing": OUTSIDE.format("ipykernel 7.3.0", "7.4", "8"),
                       "busy_again": OUTSIDE.format("ipykernel 7.3.0", "7.4", "8"),
                       "pump": OUTSIDE.format("ipykernel 7.3.0", "6", "7")}),
    "ipykernel 7.4": ({"ipykernel": (7, 4, 0), "pyzmq": (27, 3, 0)},
                      {"routing": None, "busy_again": None, "pump": OUTSIDE.format("ipykernel 7.4.0", "6", "7")}),
    "an unknown ipykernel 8": ({"ipykernel": (8, 0, 0), "pyzmq": (27, 3, 0)},
                               {"routing": OUTSIDE.format("ipykernel 8.0.0", "7.4", "8"),
                                "busy_again": OUTSIDE.format("ipykernel 8.0.0", "7.4", "8"),
                                "pump": OUTSIDE.format("ipykernel 8.0.0", "6", "7")}),
    "ipykernel 6 with an unknown pyzmq": ({"ipykernel": (6, 31, 0), "pyzmq": (28, 0, 0)},
                                          {"routing": OUTSIDE.format("ipykernel 6.31.0", "7.4", "8"),
                                           "busy_again": OUTSIDE.format("ipykernel 6.31.0", "7.4", "8"),
                                           "pump": OUTSIDE.format("pyzmq 28.0.0", "17", "28")}),
    "no ipykernel": ({"ipykernel": None, "pyzmq": None},
                     {"routing": "ipykernel is not installed", "busy_again": "ipykernel is not installed",
                      "pump": "ipykernel is not installed"}),
}


def fake(monkeypatch, found: dict) -> None:
    monkeypatch.setattr(kernel_adapter, "versions", lambda: dict(found))


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_kernel_turns_on_only_the_quirks_known_to_work_there(monkeypatch, kind):
    found, expected = KINDS[kind]
    fake(monkeypatch, found)
    assert kernel_adapter.status() == expected


def test_the_installed_versions_are_read():
    from importlib import metadata

    found = kernel_adapter.versions()
    assert found["ipykernel"] == tn.core.versions.parse_version(metadata.version("ipykernel"))
    assert found["pyzmq"] == tn.core.versions.parse_version(metadata.version("pyzmq"))


@pytest.fixture
def kernels_comm(monkeypatch):
    """Trees whose comm is ipykernel's own (what a kernel makes)."""
    ipykernel_comm = pytest.importorskip("ipykernel.comm.comm")
    import comm

    if not hasattr(ipykernel_comm.BaseComm, kernel_adapter.KERNEL_ROUTING_HOOK):
        pytest.skip("this ipykernel does not ask comms where to route (< 7.4)")
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: ipykernel_comm.BaseComm(**kwargs))
    return ipykernel_comm.BaseComm


def test_an_unknown_kernel_version_leaves_the_trees_comm_alone(monkeypatch, kernels_comm):
    """The fallback: ipykernel's own answer (the subshell the front-end chose, else the main shell), so a
    click sent on the main shell waits for the cell; the comm's handler is the kernel's."""
    fake(monkeypatch, KINDS["an unknown ipykernel 8"][0])
    with tn.Hub(ids="sequential") as hub:
        tree = AgentTree(hub, interval=0.05)
        try:
            hook = getattr(tree.comm, kernel_adapter.KERNEL_ROUTING_HOOK)
            assert hook.__func__ is getattr(kernels_comm, kernel_adapter.KERNEL_ROUTING_HOOK)
            assert not getattr(tree.comm.handle_msg, "toh_nb_routed", False)
            assert kernel_adapter.route_comm(tree.comm, kernel_routing.route, lambda msg: None) is False
            assert hook({"method": "custom"}, None) is None  # the kernel's answer: the main shell
        finally:
            tree.close()


def test_a_known_kernel_version_routes_the_trees_comm(monkeypatch, kernels_comm):
    fake(monkeypatch, KINDS["ipykernel 7.4"][0])
    with tn.Hub(ids="sequential") as hub:
        tree = AgentTree(hub, interval=0.05)
        try:
            assert getattr(tree.comm, kernel_adapter.KERNEL_ROUTING_HOOK) is kernel_routing.route
            assert getattr(tree.comm.handle_msg, "toh_nb_routed", False)
        finally:
            tree.close()


class RecordingKernel:
    """What :func:`kernel_adapter.publish_busy` reaches of a kernel, recording what it is sent."""

    ident = "k1"
    iopub_socket = object()

    def __init__(self) -> None:
        self.sent: list = []
        self.session = self

    def send(self, socket, msg_type, content, parent, ident):
        self.sent.append((socket, msg_type, content, parent, ident))


@pytest.mark.parametrize("kind, published", [("ipykernel 7.4", True), ("ipykernel 7.3", False),
                                             ("an unknown ipykernel 8", False), ("ipykernel 6.31", False)])
def test_the_running_cells_busy_is_published_again_only_on_a_known_kernel(monkeypatch, kind, published):
    fake(monkeypatch, KINDS[kind][0])
    kernel, parent = RecordingKernel(), {"header": {"msg_id": "cell-1"}}
    assert kernel_adapter.publish_busy(kernel, parent) is published
    assert kernel.sent == ([(kernel.iopub_socket, "status", {"execution_state": "busy"}, parent,
                             b"kernel.k1.status")] if published else [])


@pytest.mark.parametrize("kind", ["an unknown ipykernel 8", "ipykernel 6 with an unknown pyzmq", "ipykernel 7.4"])
def test_the_pump_never_reads_a_kernel_it_does_not_know(monkeypatch, kind):
    """Even with a shell stream there (faked), nothing is pumped outside ipykernel 6 and a known pyzmq."""
    fake(monkeypatch, KINDS[kind][0])

    class Stream:
        def flush(self, *_):
            raise AssertionError("read the shell stream of an unknown kernel")

    kernel = type("FakeKernel", (), {"shell_stream": Stream(), "kernel_info": {}})()
    monkeypatch.setattr(kernel_adapter, "kernel_and_shell", lambda: (kernel, None))
    assert kernel_adapter.pumpable_kernel() is None
    before = kernel_pump.status()
    assert kernel_pump.register(type("FakeComm", (), {"comm_id": "c1"})()) is False
    kernel_pump.pump()  # the stream is never read
    assert kernel_pump.status() == before


def test_on_a_known_ipykernel_6_the_pump_takes_the_kernels_shell_stream(monkeypatch):
    fake(monkeypatch, KINDS["ipykernel 6.31"][0])

    class Stream:
        def flush(self, *_):
            return 0

    kernel = type("FakeKernel", (), {"shell_stream": Stream(), "kernel_info": {}})()
    monkeypatch.setattr(kernel_adapter, "kernel_and_shell", lambda: (kernel, None))
    assert kernel_adapter.pumpable_kernel() is kernel
