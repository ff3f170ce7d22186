"""Every touch of ipykernel's and pyzmq's internals, in one module, each behind a version check (issue 43).

Why this module: a tree's clicks must be handled while a cell runs (:mod:`toh_nb.notebook.kernel_routing`
decides where, :mod:`toh_nb.notebook.kernel_pump` serves them on ipykernel 6), and no public API of the
kernel offers that. What those two modules need from the kernel's insides is here and nowhere else, so
the next ipykernel release is checked against one file, and the private-reach lint
(``tests/test_layering.py``, ``ALLOWED``) names exactly these reaches.

Each quirk (a :class:`~toh_nb.core.versions.Quirk`) names the versions it is known to work on. Outside
them (an older or newer ipykernel, a pyzmq past the tested majors, one of them missing) the quirk is off
and the tree does what a plain kernel does: a click sent on the kernel's main shell waits for the cell (a front-end that sends it
on a subshell of its own, JupyterLab >= 4.4 on ipykernel >= 7, is served there by the kernel itself).
:func:`status` says which quirks are on and why the others are not. The quirks:

- :data:`ROUTING` (ipykernel 7.4 to before 8): the tree's comm answers ipykernel's per-comm question
  which subshell handles a front-end message of it (``_reply_subshell_for``, :data:`KERNEL_ROUTING_HOOK`),
  and its message handler is wrapped to act after each message; subshells are created with the
  protocol's public ``create_subshell_request``.
- :data:`BUSY_AGAIN` (ipykernel 7.4 to before 8): the running cell's ``busy`` status is published again on
  the kernel's iopub socket, with the topic ipykernel gives its own statuses (``kernel.<ident>.status``).
- :data:`PUMP` (ipykernel 6, pyzmq 17 to before 28): a blocking hub call drains the kernel's shell
  stream (its receive callback ``ZMQStream._recv_callback``, :data:`STREAM_CALLBACK`, read to put it back
  exactly), handles the tree's comm messages and hands every other one back to that callback, in order.

Faking a version (tests): replace :func:`versions`.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

from ..core.versions import Quirk, Version, installed

#: the per-comm hook ipykernel >= 7.4 asks which subshell handles a front-end message of a comm (private:
#: no public seam exists); set on the tree's comm only
KERNEL_ROUTING_HOOK = "_reply_subshell_for"
#: pyzmq's ZMQStream keeps its receive callback here (no public getter): read to restore it exactly
STREAM_CALLBACK = "_recv_callback"
#: the ``kernel_info`` feature of a kernel that has subshells (JEP 91)
SUBSHELL_FEATURE = "kernel subshells"
#: the distributions whose versions the quirks check
PACKAGES = ("ipykernel", "pyzmq")

ROUTING = Quirk("routing", (("ipykernel", (7, 4), (8,)),))
BUSY_AGAIN = Quirk("busy_again", (("ipykernel", (7, 4), (8,)),))
PUMP = Quirk("pump", (("ipykernel", (6,), (7,)), ("pyzmq", (17,), (28,))))
QUIRKS = (ROUTING, BUSY_AGAIN, PUMP)


@functools.cache
def _installed() -> dict[str, Version | None]:
    return installed(PACKAGES)


def versions() -> dict[str, Version | None]:
    """``{"ipykernel": (7, 4, 0), "pyzmq": (27, 3, 0)}`` (None: not installed), read once per process.
    A test fakes another kernel by replacing this function."""
    return _installed()


def problem(quirk: Quirk) -> str | None:
    """None when ``quirk`` is on for the installed versions; else why it is off."""
    return quirk.problem(versions())


def status() -> dict[str, str | None]:
    """Each quirk's name -> None (on) or why it is off."""
    return {quirk.name: problem(quirk) for quirk in QUIRKS}


# -- the running kernel (public IPython and ipykernel API) ------------------------------------------------


def kernel_and_shell() -> tuple[Any, Any]:
    """(the running ipykernel, its IPython shell), or (None, None) outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None, None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "kernel_info"):
        return None, None
    return kernel, shell


def current_request(kernel: Any) -> dict | None:
    """The request the kernel's main shell handles now (a cell's ``execute_request``)."""
    return kernel.get_parent()


def has_subshells(kernel: Any) -> bool:
    return SUBSHELL_FEATURE in kernel.kernel_info.get("supported_features", ())


class SubshellRefused(RuntimeError):
    """The kernel answered a ``create_subshell_request`` with an error (the text says the kernel's reason)."""


def create_subshell(timeout: float) -> str:
    """A new subshell of this process's kernel, asked for on its own control channel (the protocol's
    ``create_subshell_request``); its id. Raises what went wrong (no connection file, no answer in
    ``timeout`` seconds: :class:`TimeoutError`; a refusal: :class:`SubshellRefused`)."""
    from ipykernel.connect import get_connection_file
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=get_connection_file())
    try:
        client.load_connection_file()
        client.start_channels(shell=False, iopub=False, stdin=False, hb=False, control=True)
        request = client.session.msg("create_subshell_request", {})
        client.control_channel.send(request)
        deadline = time.monotonic() + timeout
        while True:  # the reply to our request (the control channel answers each of its requests)
            reply = client.control_channel.get_msg(timeout=max(0.01, deadline - time.monotonic()))
            if reply.get("parent_header", {}).get("msg_id") == request["header"]["msg_id"]:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no create_subshell_reply within {timeout} s")
        content = reply.get("content", {})
        if content.get("status") != "ok" or not isinstance(content.get("subshell_id"), str):
            raise SubshellRefused(f"the kernel refused a subshell: {content.get('evalue') or content}")
        return content["subshell_id"]
    finally:
        try:
            client.stop_channels()
        except Exception:
            pass


# -- ROUTING: the per-comm subshell hook (ipykernel >= 7.4) ------------------------------------------------


def route_comm(comm: Any, route: Callable[[Any, Any], Any], after: Callable[[Any], None]) -> bool:
    """Have ipykernel ask ``route(data, default)`` which subshell handles each front-end message of
    ``comm``, and call ``after(msg)`` once ``comm`` handled one; True if done (now or before). False, with
    ``comm`` untouched, where :data:`ROUTING` is off or the comm has no hook (the ``comm`` package's own)."""
    if comm is None or problem(ROUTING) is not None or not callable(getattr(comm, KERNEL_ROUTING_HOOK, None)):
        return False
    setattr(comm, KERNEL_ROUTING_HOOK, route)  # on this comm only: ipykernel looks it up per comm
    handle = comm.handle_msg
    if not getattr(handle, "toh_nb_routed", False):
        def handle_msg(msg: Any) -> Any:
            try:
                return handle(msg)
            finally:
                after(msg)

        handle_msg.toh_nb_routed = True  # type: ignore[attr-defined]
        comm.handle_msg = handle_msg  # this comm's public handler, wrapped (what the kernel calls)
    return True


# -- BUSY_AGAIN: a status on the kernel's iopub socket (ipykernel >= 7.4) ----------------------------------


def publish_busy(kernel: Any, parent: dict) -> bool:
    """Publish ``busy`` for request ``parent`` as the kernel publishes its own statuses; False (nothing
    sent) where :data:`BUSY_AGAIN` is off. Raises what the session raises."""
    if problem(BUSY_AGAIN) is not None:
        return False
    kernel.session.send(kernel.iopub_socket, "status", {"execution_state": "busy"}, parent=parent,
                        ident=f"kernel.{kernel.ident}.status".encode())
    return True


# -- PUMP: the shell stream of ipykernel 6 (pyzmq's ZMQStream) ---------------------------------------------


def pumpable_kernel() -> Any:
    """The running ipykernel if :data:`PUMP` is on and it reads its shell stream on the main thread
    (ipykernel 6), else None."""
    if problem(PUMP) is not None:
        return None
    kernel, _ = kernel_and_shell()
    stream = getattr(kernel, "shell_stream", None)
    if stream is None or not callable(getattr(stream, "flush", None)):
        return None
    return kernel


def shell_callback(kernel: Any) -> Callable[[list], None] | None:
    """The shell stream's receive callback (what queues a message in the kernel's message queue), or
    None where there is none to restore (no stream, a closed one, no callback)."""
    stream = getattr(kernel, "shell_stream", None)
    if stream is None or stream.closed():
        return None
    return getattr(stream, STREAM_CALLBACK, None)


def drain_shell(kernel: Any, into: Callable[[list], None], original: Callable[[list], None]) -> None:
    """Hand ``into`` every message waiting in the kernel's shell stream (pyzmq's own ``flush``, which keeps
    the stream's poll state right), with the stream's callback swapped for ``into`` for that moment and
    ``original`` put back at once, also when interrupted."""
    stream = kernel.shell_stream
    stream.on_recv(into, copy=False)
    try:
        stream.flush(_POLLIN)
    finally:
        stream.on_recv(original, copy=False)


def comm_message_of(kernel: Any, raw: list) -> tuple[list, str] | None:
    """(its frames, its comm id) if ``raw`` is a ``comm_msg``; None otherwise. Reads only the envelope
    (``deserialize(content=False)``), which leaves the signature unrecorded: the kernel still accepts the
    message later. Raises what the session raises on a malformed message."""
    session = kernel.session
    _, frames = session.feed_identities(raw, copy=False)
    envelope = session.deserialize(frames, content=False, copy=False)
    if envelope["header"].get("msg_type") != "comm_msg":
        return None
    return frames, session.unpack(envelope["content"]).get("comm_id")


def kernels_comm(kernel: Any, comm_id: str) -> Any:
    """The comm the kernel's comm manager holds under ``comm_id`` (None: closed or unknown)."""
    return getattr(kernel.comm_manager, "comms", {}).get(comm_id)


def decode(kernel: Any, frames: list) -> dict:
    """The whole message of ``frames`` (its signature checked and recorded now)."""
    return kernel.session.deserialize(frames, content=True, copy=False)


try:
    from zmq import POLLIN as _POLLIN
except ImportError:  # no pyzmq: no kernel to pump either
    _POLLIN = 1
