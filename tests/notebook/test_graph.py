"""hub.graph(): the Mermaid picture of the tree (the sync hub draws it; its rows come from the AsyncHub)."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.notebook.graph import MermaidGraph, mermaid_source
from toh_nb.notebook.treeview import preorder, tree_rows

EXPECTED = "\n".join([
    "flowchart TD",
    '    n0["root (you)<br/>idle"]',
    '    n1["notes · agent-1<br/>continuable · ready"]',
    '    n2[["job crawl · subagent-1<br/>completed"]]',
    '    n3["crawl · agent-2<br/>one-shot · completed"]',
    "    n0 --> n1",
    "    n0 -.-> n2",
    "    n2 --> n3",
    "    classDef completed stroke:#2e7d32,stroke-width:2px",
    "    class n2,n3 completed",
    "    classDef idle stroke:#2e7d32,stroke-width:2px",
    "    class n0 idle",
    "    classDef ready stroke:#6a1b9a,stroke-width:2px",
    "    class n1 ready"])


async def echo(request: tn.ModelRequest) -> str:
    return f"{request.label}: {request.last_user_text}"


def test_hub_graph_is_a_mermaid_flowchart_of_agents_and_jobs():
    with tn.Hub(tn.FunctionModel(echo), ids="sequential") as hub:
        hub.start("Keep notes", label="notes").wait()
        hub.spawn("Crawl", label="crawl", background=True).output(wait=True)
        graph = hub.graph()
    assert isinstance(graph, MermaidGraph)
    assert str(graph) == repr(graph) == EXPECTED
    bundle = graph._repr_mimebundle_()
    assert bundle == {"text/plain": EXPECTED, "text/vnd.mermaid": EXPECTED,
                      "text/markdown": f"```mermaid\n{EXPECTED}\n```"}
    assert [row["id"] for row in graph.rows] == ["root", "agent-1", "subagent-1", "agent-2"]


def test_async_hub_graph_has_the_same_text():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(echo), ids="sequential") as hub:
            kid = await hub.start("Keep notes", label="notes")
            await kid.wait()
            job = await hub.spawn("Crawl", label="crawl", background=True)
            await job.output(wait=True)
            return str(MermaidGraph(tree_rows(hub)))  # what Hub.graph() draws, from an AsyncHub

    assert asyncio.run(main()) == EXPECTED


def test_labels_cannot_break_the_mermaid_text():
    rows = preorder([{"kind": "agent", "id": "root", "tree_parent": None, "mode": "root", "status": "idle"},
                     {"kind": "agent", "id": "agent-1", "tree_parent": "root", "mode": "continuable",
                      "status": "ready", "label": 'say "hi" <b>&\nbye', "started": 1.0}])
    assert mermaid_source(rows).splitlines()[2] == (
        '    n1["say #quot;hi#quot; #lt;b#gt;#amp; bye · agent-1<br/>continuable · ready"]')
