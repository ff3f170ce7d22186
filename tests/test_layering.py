"""Dependencies point one way: the engine never imports Jupyter, widgets or pandas."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "toh_nb"
FORBIDDEN = re.compile(r"^\s*(import|from)\s+(ipywidgets|IPython|pandas|toh_nb\.notebook)\b", re.M)


def test_engine_packages_import_no_notebook_libraries():
    offenders = []
    for package in ("core", "models", "store", "jobs", "subagents", "providers", "serve", "mcp", "tracing"):
        for path in (ROOT / package).rglob("*.py"):
            if FORBIDDEN.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_running_the_async_engine_loads_neither_pandas_nor_widgets():
    code = (
        "import asyncio, sys\n"
        "import toh_nb as tn\n"
        "async def main():\n"
        "    async with tn.AsyncHub(tn.FunctionModel(lambda r: 'ok'), ids='sequential') as hub:\n"
        "        await hub.spawn('hello', label='x')\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('pandas', 'ipywidgets', 'IPython') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_core_does_not_import_model_implementations():
    """The model protocol lives in the core (``core/model.py``); ``models/`` depends on it, never back."""
    offenders = [str(path.relative_to(ROOT)) for path in (ROOT / "core").rglob("*.py")
                 if re.search(r"^\s*from\s+(\.\.models|toh_nb\.models)\b", path.read_text(), re.M)]
    assert offenders == []


def test_the_async_face_imports_no_notebook_layer():
    """hub.py returns plain rows; DataFrames, widgets and pictures are made in notebook/ (one direction)."""
    relative = re.compile(r"^\s*from\s+\.notebook\b", re.M)
    offenders = [name for name in ("hub.py", "results.py", "snapshots.py", "costs.py")
                 if FORBIDDEN.search((ROOT / name).read_text()) or relative.search((ROOT / name).read_text())]
    assert offenders == []


# -- private reaches across packages (issue #28) ----------------------------------------------------

#: THE allow-list of private reaches (the one place: a new reach fails the test below until it is named
#: here with its reason). Each sits in an adapter that checks the library's version first and falls back
#: without the reach elsewhere (toh_nb.core.versions.Quirk).
ALLOWED = {
    # the standard library has no public hook that runs before threading joins its workers at exit
    # (a LocalModel generation must stop first); atexit is the fallback where it is missing
    ("models/local_engine.py", 'getattr(_, "_register_atexit")'): 1,
    # ipykernel >= 7.4 asks each comm which subshell handles a front-end message of it; no public seam.
    # kernel_adapter.ROUTING (ipykernel 7.4 to before 8); fallback: the comm is left alone, a main-shell
    # click waits for the cell. getattr: the comm has the hook; setattr: the tree's comm answers it
    ("notebook/kernel_adapter.py", 'getattr(_, "_reply_subshell_for")'): 1,
    ("notebook/kernel_adapter.py", 'setattr(_, "_reply_subshell_for")'): 1,
    # pyzmq's ZMQStream has no getter for its receive callback, read to put exactly it back after draining
    # ipykernel 6's shell stream; kernel_adapter.PUMP (ipykernel 6, pyzmq 17 to before 28); fallback: no pump
    ("notebook/kernel_adapter.py", 'getattr(_, "_recv_callback")'): 1,
    # Ray reads its documented single-node switch only at import; the value it read is set again in its
    # private constants module; ray_adapter.SINGLE_NODE (Ray 2.9 to before 3); fallback: the variable only
    ("providers/ray/ray_adapter.py", "import ray._private.ray_constants"): 1,
}


def _package_files():
    for path in sorted(ROOT.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


ATTRIBUTE_CALLS = ("getattr", "setattr", "hasattr", "delattr")


def _module_constants(tree: ast.AST) -> dict[str, str]:
    """The module's top-level string constants (``NAME = "..."``, ``NAME: str = "..."``)."""
    found = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update((t.id, node.value.value) for t in node.targets if isinstance(t, ast.Name))
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            found[node.target.id] = node.value.value
    return found


def _module_key(relative: str, level: int, module: str | None) -> str | None:
    """``a/b/c.py``-style key of the toh_nb module an import names (None: not one of ours)."""
    if level == 0:
        parts = (module or "").split(".")
        if parts[0] != "toh_nb":
            return None
        parts = parts[1:]
    else:
        base = _base(relative, level)
        if base is None:
            return None
        parts = base + [p for p in (module or "").split(".") if p]
    return "/".join(parts)


def _known_strings(relative: str, tree: ast.AST, constants: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """(name -> string, module alias -> that module's constants) visible in ``relative``: its own top-level
    constants and those it imports from another toh_nb module (``from .m import NAME``, ``from . import m``)."""
    names = dict(constants.get(relative, {}))
    modules: dict[str, dict[str, str]] = {}

    def of(key: str | None) -> dict[str, str] | None:
        if key is None:
            return None
        return constants.get(f"{key}.py") if f"{key}.py" in constants else constants.get(f"{key}/__init__.py")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            key = _module_key(relative, node.level, node.module)
            source = of(key)
            for alias in node.names:
                if source is not None and alias.name in source:
                    names[alias.asname or alias.name] = source[alias.name]
                sub = of(f"{key}/{alias.name}" if key else None)
                if sub is not None:
                    modules[alias.asname or alias.name] = sub
        elif isinstance(node, ast.Import):
            for alias in node.names:
                sub = of(_module_key(relative, 0, alias.name))
                if sub is not None and alias.asname:
                    modules[alias.asname] = sub
    return names, modules


def _string_of(node: ast.AST, names: dict, modules: dict) -> str | None:
    """The string ``node`` is: a literal, a module-level constant (``HOOK``) or another module's (``m.HOOK``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
        return modules[node.value.id].get(node.attr)
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _reaches(tree: ast.AST, names: dict | None = None, modules: dict | None = None) -> list[str]:
    """``getattr(x, "_name")`` (any non-dunder private name, written out or through a string constant:
    ``HOOK = "_name"; getattr(x, HOOK)``), ``x.__class__ = ...``, ``sys.modules``, and a private module of
    another package imported (``from ray._private import x``, ``import_module("ray._private.x")``)."""
    names = _module_constants(tree) if names is None else names
    modules = {} if modules is None else modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS \
                and len(node.args) >= 2:
            member = _string_of(node.args[1], names, modules)
            if member is not None and _private(member):
                found.append(f'{node.func.id}(_, "{member}")')
        if isinstance(node, ast.Call) and node.args and (
                isinstance(node.func, ast.Name) and node.func.id == "import_module"
                or isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"):
            module = _string_of(node.args[0], names, modules)
            if module is not None and any(_private(part) for part in module.split(".")):
                found.append(f"import {module}")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr == "__class__":
                found.append("__class__ =")
        if (isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name)
                and node.value.id == "sys"):
            found.append("sys.modules")
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "modules" for a in node.names):
            found.append("sys.modules")
        imported = ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0
                    else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for module in imported:
            if not module.startswith("toh_nb") and any(_private(part) for part in module.split(".")):
                found.append(f"import {module}")
    return found


def _all_reaches() -> dict:
    """(module, reach) -> how often, over the whole package."""
    files = list(_package_files())
    constants = {relative: _module_constants(tree) for relative, tree in files}
    counts: dict = {}
    for relative, tree in files:
        names, modules = _known_strings(relative, tree, constants)
        for reach in _reaches(tree, names, modules) + _private_imports(relative, tree):
            counts[(relative, reach)] = counts.get((relative, reach), 0) + 1
    return counts


def _base(relative: str, level: int) -> list[str] | None:
    """The package path a relative import of ``level`` dots in ``relative`` starts from (None: above toh_nb)."""
    dirs = relative.split("/")[:-1]
    if level - 1 > len(dirs):
        return None
    return dirs[:len(dirs) - (level - 1)]


def _package_of(relative: str) -> str:
    return relative.split("/")[0] if "/" in relative else relative


def _private_imports(relative: str, tree: ast.AST) -> list[str]:
    """``from <another package> import _name``: a private name taken across packages."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level == 0 and not (node.module or "").startswith("toh_nb"):
            continue
        names = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
        if not names:
            continue
        if node.level == 0:
            target = (node.module or "").split(".")[1:2]
        else:
            target = (_base(relative, node.level) or []) + [p for p in (node.module or "").split(".") if p]
            target = target[:1]
        if target != [_package_of(relative)]:
            found.append(f"from {'.' * node.level}{node.module or ''} import {', '.join(names)}")
    return found


def test_no_private_reaches_across_packages():
    """No module takes another object's private member by name (``getattr(x, "_y")``), swaps an object's
    class, reads ``sys.modules`` or imports another package's private name: plug-ins use public seams."""
    assert _all_reaches() == ALLOWED


def test_the_reach_scan_sees_each_kind():
    source = ('import sys\nfrom sys import modules\ngetattr(x, "_y")\nhasattr(x, "_z", 1)\nx.__class__ = T\n'
              'getattr(x, "__name__")\nsys.modules.get("a")\n')
    assert sorted(_reaches(ast.parse(source))) == sorted(["sys.modules", 'getattr(_, "_y")', 'hasattr(_, "_z")',
                                                          "__class__ =", "sys.modules"])
    hidden = ('HOOK = "_reply_subshell_for"\nLOUD: str = "_recv_callback"\nPUBLIC = "handle_msg"\n'
              'setattr(comm, HOOK, f)\ngetattr(stream, LOUD, None)\ngetattr(comm, PUBLIC)\n'
              'from ray._private import ray_constants\nimport ray._private.services as s\nimport ray.util\n'
              'importlib.import_module("ray._private.worker")\n')
    assert sorted(_reaches(ast.parse(hidden))) == sorted([
        'setattr(_, "_reply_subshell_for")', 'getattr(_, "_recv_callback")', "import ray._private",
        "import ray._private.services", "import ray._private.worker"])
    # a constant imported from another module of the package (or read as ``module.NAME``) is resolved too
    constants = {"notebook/kernel_adapter.py": {"HOOK": "_reply_subshell_for"}}
    user = ast.parse("from .kernel_adapter import HOOK\nfrom . import kernel_adapter as ka\n"
                     "getattr(x, HOOK)\nhasattr(x, ka.HOOK)\n")
    names, modules = _known_strings("notebook/widget.py", user, constants)
    assert sorted(_reaches(user, names, modules)) == ['getattr(_, "_reply_subshell_for")',
                                                      'hasattr(_, "_reply_subshell_for")']
    assert _private_imports("serve/acp.py", ast.parse("from ..providers.acp.link import _acp\nfrom .stdio import _x\n"
                                                      "from toh_nb.core.agent import _FROM_MODEL\n")) == [
        "from ..providers.acp.link import _acp", "from toh_nb.core.agent import _FROM_MODEL"]


def test_no_noqa_for_private_access_in_the_package():
    """No line of the package silences SLF001: a handle reaches its hub's parts through public seams
    (a job through its own registry, a child's settle-wait through ``hub.view``)."""
    counts = {}
    for path in sorted(ROOT.rglob("*.py")):
        hits = len(re.findall(r"noqa:[^\n]*SLF001", path.read_text()))
        if hits:
            counts[str(path.relative_to(ROOT))] = hits
    assert counts == {}


# -- import direction (issue #28) -----------------------------------------------------------------

#: package -> the toh_nb packages (and top modules) it must never import
NEVER = {
    "core": {"models", "store", "jobs", "subagents", "providers", "serve", "notebook", "hub", "results"},
    "providers": {"subagents", "jobs", "store", "serve", "notebook", "hub"},
    "subagents": {"serve", "notebook", "hub"},
    "serve": {"notebook"},
}


def _imported_packages(relative: str, tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("toh_nb."))
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "toh_nb":
                    found.add(parts[1] if len(parts) > 1 else "")
            else:
                base = _base(relative, node.level)
                if base is None:
                    continue
                parts = base + [p for p in (node.module or "").split(".") if p]
                found.add(parts[0]) if parts else found.update(a.name for a in node.names)
    return found


def test_imports_point_one_way():
    offenders = []
    for relative, tree in _package_files():
        package = _package_of(relative)
        if package not in NEVER:
            continue
        bad = _imported_packages(relative, tree) & NEVER[package]
        if bad:
            offenders.append((relative, sorted(bad)))
    assert offenders == []


def test_the_providers_import_no_other_provider_and_the_subagents_only_the_seam():
    """A provider author reads two files: ``providers/base.py`` and ``core/steps.py``. The service knows
    the seam (and the in-process providers), never the ACP or Ray ones."""
    offenders = []
    for relative, tree in _package_files():
        text = ast.unparse(tree)
        if relative.startswith("subagents/") and re.search(r"providers\.(acp|ray)\b", text):
            offenders.append(relative)
        for name in ("acp", "ray"):
            other = {"acp": "ray", "ray": "acp"}[name]
            if relative.startswith(f"providers/{name}/") and re.search(rf"\.\.{other}\b|providers\.{other}\b", text):
                offenders.append(relative)
    assert offenders == []


def test_the_step_loop_never_imports_the_agent():
    tree = ast.parse((ROOT / "core" / "steps.py").read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "agent" not in modules and "toh_nb.core.agent" not in modules
    assert modules >= {"budget", "content", "tools"}  # the scan reads this file's imports
    assert _imported_packages("core/steps.py", tree) == {"core"}
    assert _imported_packages("providers/acp/link.py", ast.parse("from ...core.errors import X\nfrom .. import base\n"
                                                                  "from ... import __version__\n")) == {
        "core", "providers", "__version__"}


# -- the layers and the drawing of docs/architecture.md (issue #43) ------------------------------------

def _architecture():
    import importlib.util

    path = ROOT.parent / "docs" / "architecture_graph.py"
    spec = importlib.util.spec_from_file_location("architecture_graph", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_unit_sits_in_a_layer_and_imports_only_its_own_and_those_below():
    """Layers: 1 core; 2 models, store, jobs, tracing, costs; 3 providers, subagents, mcp (the client);
    4 engine, config, results, snapshots, conversation, timeline, events, view; 5 faces (hub,
    notebook, serve). No cycle between units, no arrow running back up."""
    architecture = _architecture()
    graph = architecture.imports()
    assert {"core", "mcp", "tracing", "serve", "engine", "hub", "notebook"} <= set(graph)
    assert architecture.problems(graph) == []


def test_the_layer_check_sees_an_arrow_up_a_rule_and_a_cycle():
    architecture = _architecture()
    graph = {"core": {"hub": ["core/x.py"]}, "hub": {"core": ["hub.py"]}, "providers": {"subagents": ["providers/a.py"]},
             "subagents": {}, "nowhere": {}}
    assert architecture.problems(graph) == [
        "nowhere: in no layer of docs/architecture_graph.py LAYERS",
        "core (layer 1) imports hub (layer 5): core/x.py",
        "providers must not import subagents: providers/a.py",
        "cycle: core -> hub -> core"]


def test_the_committed_drawing_is_the_scripts_output():
    architecture = _architecture()
    assert architecture.committed() == architecture.mermaid(architecture.imports()), (
        "docs/architecture.md's package drawing is stale: run python docs/architecture_graph.py --write")


def test_the_widget_does_not_import_the_sync_face_that_imports_it():
    """``notebook/hub.py`` makes the tree (``hub.tree()``); the tree knows the sync face by its public
    ``async_hub``, so the two modules are no circle (issue #43)."""
    assert "hub" in _imported_modules("notebook/widget.py")  # the scan reads the file (toh_nb.hub's AsyncHub)
    assert "notebook.hub" not in _imported_modules("notebook/widget.py")
    assert "notebook.widget" in _imported_modules("notebook/hub.py")


def _imported_modules(relative: str) -> set[str]:
    """The ``toh_nb`` modules a file imports (lazy imports included), as dotted paths below ``toh_nb``."""
    tree = ast.parse((ROOT / relative).read_text())
    package = relative.split("/")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - (node.level - 1)]
            found.add(".".join(base + ([node.module] if node.module else [])))
    return found
