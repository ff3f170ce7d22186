"""The package drawing of docs/architecture.md, read from the code (every ``import`` of every module,
lazy ones inside functions included), and the layers it must respect.

    python docs/architecture_graph.py            # print the Mermaid block
    python docs/architecture_graph.py --write    # rewrite it in docs/architecture.md

``tests/test_layering.py`` fails when a unit of ``toh_nb`` sits in no layer, imports a higher layer,
breaks a rule within its layer, closes a cycle, or when the committed drawing differs from this output.
A *unit* is a sub-package (``core``, ``serve`` …) or a top-level module (``hub``, ``engine`` …).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "toh_nb"
PAGE = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- packages: begin (docs/architecture_graph.py --write) -->", "<!-- packages: end -->"

#: layer -> (its name, its units); a unit imports only units of its own layer or below
LAYERS = {
    1: ("the core", ("core", "version", "_moved")),
    2: ("parts", ("models", "store", "jobs", "tracing", "costs")),
    3: ("plug-ins", ("providers", "subagents", "mcp")),
    4: ("the engine", ("engine", "config", "results", "snapshots", "conversation", "timeline", "events", "view")),
    5: ("faces", ("hub", "notebook", "serve", "testing", "__main__", "__init__", "acp", "ray", "activations")),
}
#: within a layer: unit -> the units of that layer it must never import
NEVER_WITHIN = {
    "providers": {"subagents", "mcp"},  # a provider author reads providers/base.py and core/steps.py only
    "mcp": {"subagents", "providers"},  # the MCP client plug-in knows tools, not children
    "jobs": {"models", "store", "tracing"},
    "store": {"models", "jobs", "tracing"},
    "models": {"store", "jobs", "tracing"},
}
#: units left out of the drawing: helpers every layer may name, and the old import paths kept one release
NOT_DRAWN = {"version", "_moved", "acp", "ray", "activations", "__init__", "__main__"}
#: drawn without their incoming arrows: every unit imports them (the page says so under the drawing)
EVERYONE_IMPORTS = {"core"}


def layer_of(unit: str) -> int | None:
    return next((layer for layer, (_, units) in LAYERS.items() if unit in units), None)


def _unit(relative: str) -> str:
    parts = relative.split("/")
    return parts[0] if len(parts) > 1 else parts[0][:-3]


def _targets(relative: str, node: ast.AST) -> list[str]:
    """The ``toh_nb`` units an import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[1] for alias in node.names if alias.name.startswith("toh_nb.")]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        parts = (node.module or "").split(".")
        if parts[0] != "toh_nb":
            return []
        return [parts[1]] if len(parts) > 1 else [alias.name for alias in node.names]
    dirs = relative.split("/")[:-1]
    if node.level - 1 > len(dirs):
        return []
    base = dirs[:len(dirs) - (node.level - 1)]
    parts = base + [p for p in (node.module or "").split(".") if p]
    return [parts[0]] if parts else [alias.name for alias in node.names]


def imports() -> dict[str, dict[str, list[str]]]:
    """unit -> imported unit -> the modules of ``unit`` that import it (sorted)."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE))
        unit = _unit(relative)
        found.setdefault(unit, defaultdict(set))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(relative, node):
                if target != unit:
                    found[unit][target].add(relative)
    return {unit: {target: sorted(modules) for target, modules in targets.items()} for unit, targets in found.items()}


def problems(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """What breaks the layers: an unplaced unit, an arrow up, a rule within a layer, a cycle."""
    out = [f"{unit}: in no layer of docs/architecture_graph.py LAYERS" for unit in graph if layer_of(unit) is None]
    for unit, targets in graph.items():
        own = layer_of(unit)
        for target, modules in targets.items():
            theirs = layer_of(target)
            if own is None or theirs is None:
                continue
            if theirs > own:
                out.append(f"{unit} (layer {own}) imports {target} (layer {theirs}): {', '.join(modules)}")
            elif target in NEVER_WITHIN.get(unit, ()):
                out.append(f"{unit} must not import {target}: {', '.join(modules)}")
    out += [f"cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return out


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """Each cycle of the unit graph, once (depth-first, from the first unit on it)."""
    found, state = [], {}

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = "open"
        for target in sorted(graph.get(unit, {})):
            if state.get(target) == "open":
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[unit] = "done"

    for unit in sorted(graph):
        if unit not in state:
            visit(unit, [unit])
    return found


def mermaid(graph: dict[str, dict[str, list[str]]]) -> str:
    """The drawing: one box per layer (top: the faces), an arrow per import between drawn units."""
    lines = ["```mermaid", "flowchart TB"]
    for layer in sorted(LAYERS, reverse=True):
        name, units = LAYERS[layer]
        drawn = [unit for unit in units if unit not in NOT_DRAWN and unit in graph]
        lines.append(f'  subgraph L{layer}["{layer} · {name}"]')
        lines += [f"    {_node(unit)}[\"{_label(unit)}\"]" for unit in drawn]
        lines.append("  end")
    for unit in sorted(graph, key=lambda u: (-(layer_of(u) or 0), u)):
        if unit in NOT_DRAWN:
            continue
        for target in sorted(graph[unit], key=lambda u: (-(layer_of(u) or 0), u)):
            if target not in NOT_DRAWN and target not in EVERYONE_IMPORTS and target in graph:
                lines.append(f"  {_node(unit)} --> {_node(target)}")
    lines.append("```")
    return "\n".join(lines)


def _node(unit: str) -> str:
    return f"u_{unit}"


def _label(unit: str) -> str:
    return f"{unit}/" if (PACKAGE / unit).is_dir() else f"{unit}.py"


def committed() -> str | None:
    """The drawing docs/architecture.md holds now (between its markers), or None."""
    text = PAGE.read_text()
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    text = PAGE.read_text()
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    PAGE.write_text(f"{before}{BEGIN}\n{mermaid(imports())}\n{END}{after}")


def main(argv: list[str]) -> int:
    graph = imports()
    for problem in problems(graph):
        print(f"layering: {problem}", file=sys.stderr)
    if argv[1:] == ["--write"]:
        write()
    else:
        print(mermaid(graph))
    return 1 if problems(graph) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
