"""Run as a script by ``test_base_install.py``: what ``pip install toh-nb`` alone (no extras) can do.

Every module of an installed distribution outside the closure of toh_nb's base ``dependencies`` is
made unimportable before toh_nb is imported, so a base import that reaches an extra's package
(``anyio`` through the MCP client once broke the release's demo) fails here, in any venv, as it would in
the wheel-only virtualenv of ``.ci/run``. Prints one line per check; the test compares them.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.metadata as metadata
import io
import pathlib
import sys
import tempfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def base_closure() -> set[str]:
    """The distributions a base install of toh_nb brings (its requirements without extras, recursively)."""
    seen: set[str] = set()
    todo = [Requirement(line) for line in metadata.distribution("toh_nb").requires or ()]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue  # seen, or only with an extra (or on another platform)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [Requirement(line) for line in dist.requires or ()]
    return seen


def blocked_modules() -> set[str]:
    allowed = base_closure()
    return {module for module, dists in metadata.packages_distributions().items()
            if module != "toh_nb" and not any(canonicalize_name(dist) in allowed for dist in dists)}


class _Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001 - the finder protocol
        if name.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not a base dependency)", name=name)
        return None


def main() -> None:
    here = pathlib.Path(__file__).resolve().parent  # tests/ holds acp/, mcp/, ray/: never importable as those
    sys.path[:] = [entry for entry in sys.path if pathlib.Path(entry or ".").resolve() != here]
    blocked = blocked_modules()
    for module in list(sys.modules):
        if module.partition(".")[0] in blocked:
            del sys.modules[module]
    sys.meta_path.insert(0, _Blocker(blocked))
    print("blocking anyio:", "anyio" in blocked or "anyio" not in metadata.packages_distributions())

    import toh_nb as tn
    from toh_nb.__main__ import main as cli

    for name in tn.__all__:
        try:
            getattr(tn, name)
        except Exception as error:  # noqa: BLE001 - every failure is printed and fails the test
            print(f"export {name}: {type(error).__name__}: {error}")
    print("exports resolved")

    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = cli(["demo", "--latency", "0"])
    print("demo:", code, "tree" in out.getvalue())

    with tempfile.TemporaryDirectory() as store, tn.Hub(ids="sequential", store=store) as hub:
        hub.run("hi")
        print(repr(hub.tree()).splitlines()[0])
        hub.spawn("in the background", background=True).result()
        print("jobs table:", list(hub.jobs().columns)[:2])
        hub.transcript(hub.agents()["id"].iloc[-1])

    with tempfile.NamedTemporaryFile(suffix=".gguf") as gguf:
        makers = {
            "openai": lambda: tn.OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"),
            "local": lambda: tn.LocalModel(gguf.name).load(),  # the extra is reported on loading
            "acp": lambda: tn.AcpAgent(["true"]),
            "ray": lambda: tn.RayProvider(),
            "mcp": lambda: tn.MCPServer(["true"]),
            "otel": lambda: tn.Hub(tracing=True),
        }
        for extra, make in makers.items():
            try:
                made = make()
            except (tn.UsageError, tn.ModelError) as error:
                print(f"{extra}: {'toh-nb[' + extra + ']' in str(error)}")
            else:  # the extra is part of this closure (e.g. a future base dependency): nothing to check
                print(f"{extra}: built {type(made).__name__}")
                getattr(made, "close", lambda: None)()


if __name__ == "__main__":
    main()
