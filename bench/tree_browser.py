"""The agent tree in a real browser: a 1,000-node render and a 100-row refresh in JupyterLab + Chromium.

``tree_render``: a notebook in JupyterLab (headless system Chromium, driven by Playwright; the harness
is ``tests/notebook/lab.py``) builds a hub with N agents (the root + N−1 one-shot children), then runs
the cell ``tree = hub.tree(); tree``; the figure is the wall time from running that cell until the page
shows all N rows (kernel: reading the tree and building the rows; comm; the ES module drawing them).
``view_created_ms`` is the part until the widget's view appears in the page (kernel, comm, loading
the ES module), ``rows_drawn_ms`` the part from there until every row is drawn; ``python_rows_ms`` is
the kernel's row building alone (``tree_rows`` + ``widget_rows``, measured in this process).

``tree_refresh``: a cell changes 100 rows of the synced state (status and turns) and assigns
``tree.rows``; the figure is the wall time until the page shows the 100 changed badges — the
median of ``--repeat`` runs alternating two states. Both are measured, never asserted (the machine is
shared); the target of issue 17 is "well under a second" for each.

    python bench/tree_browser.py [--n 1000] [--changed 100] [--repeat 5] [--json] [--screenshot PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.notebook import lab  # noqa: E402  (the shared JupyterLab + Chromium harness)

TARGET_S = 1.0


def cells(n: int, changed: int) -> list[str]:
    return [
        "import toh_nb as tn\n"
        "async def reply(request):\n"
        "    return 'ok'\n"
        "hub = tn.Hub(tn.FunctionModel(reply), ids='sequential')\n"
        f"for i in range({n - 1}):\n"
        "    hub.spawn(f'task {i}', label=f'worker {i}')",
        "tree = hub.tree(interval=10.0)\ntree",  # no engine events follow: the interval only delays nothing
        "flip = globals().get('flip', 0) + 1\n"
        "state = 'failed' if flip % 2 else 'killed'\n"
        "rows = [dict(r) for r in tree.rows]\n"
        f"for r in rows[1:{changed + 1}]:\n"
        "    r['status'] = state\n"
        "    r['turns'] += 1\n"
        "tree.rows = rows",
    ]


def python_rows_ms(n: int) -> float:
    import toh_nb as tn
    from toh_nb.notebook.treeview import tree_rows
    from toh_nb.notebook.widget import widget_rows

    async def reply(request):
        return "ok"

    with tn.Hub(tn.FunctionModel(reply), ids="sequential") as hub:
        for i in range(n - 1):
            hub.spawn(f"task {i}", label=f"worker {i}")
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            rows = hub.portal.call(lambda: widget_rows(tree_rows(hub.async_hub)))
            best = min(best, time.perf_counter() - started)
        assert len(rows) == n
    return best * 1000


def count_js(selector: str) -> str:
    return f"""([n]) => {{
        const cells = document.querySelectorAll('.jp-Notebook .jp-CodeCell');
        const out = cells[1] && cells[1].querySelector('.toh-tree');
        return !!out && out.querySelectorAll('{selector}').length === n;
    }}"""


# page-side marks: when the cell was run, when the tree's view appeared, when all its rows were drawn
WATCH_JS = """(n) => {
    const marks = window.__treeMarks = {start: performance.now(), view: null, drawn: null};
    const observer = new MutationObserver(() => {
        const cell = document.querySelectorAll('.jp-Notebook .jp-CodeCell')[1];
        const tree = cell && cell.querySelector('.toh-tree');
        if (tree && marks.view === null) marks.view = performance.now();
        if (tree && tree.querySelectorAll('.toh-row').length === n) {
            marks.drawn = performance.now();
            observer.disconnect();
        }
    });
    observer.observe(document.body, {childList: true, subtree: true});
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--screenshot", default=None)
    args = parser.parse_args()
    reason = lab.missing()
    if reason:
        print(json.dumps({"name": "tree_render", "skipped": reason}))
        return
    figures = []
    with tempfile.TemporaryDirectory(prefix="toh-tree-bench-") as tmp:
        with lab.lab_page(pathlib.Path(tmp), cells(args.n, args.changed)) as (page, _server):
            lab.run_cell(page, 0)
            page.wait_for_function("""() => {
                const c = document.querySelectorAll('.jp-Notebook .jp-CodeCell')[0];
                return c && c.querySelector('.jp-InputPrompt').textContent.includes('[1]');
            }""", polling=100, timeout=300_000)
            page.evaluate(WATCH_JS, args.n)
            started = time.perf_counter()
            lab.run_cell(page, 1)
            page.wait_for_function(count_js(".toh-row"), arg=[args.n], polling="raf", timeout=120_000)
            render = time.perf_counter() - started
            marks = page.evaluate("() => window.__treeMarks")
            figures.append({"name": "tree_render", "n": args.n, "seconds": round(render, 3),
                            "view_created_ms": round(marks["view"] - marks["start"]),
                            "rows_drawn_ms": round(marks["drawn"] - marks["view"]),
                            "python_rows_ms": round(python_rows_ms(args.n), 1), "target": TARGET_S,
                            "meets_target": render < TARGET_S})
            samples = []
            for k in range(args.repeat):
                state = "failed" if (k + 1) % 2 else "killed"
                started = time.perf_counter()
                lab.run_cell(page, 2)
                page.wait_for_function(count_js(f".toh-badge.toh-{state}"), arg=[args.changed], polling="raf",
                                       timeout=60_000)
                samples.append(time.perf_counter() - started)
            median = statistics.median(samples)
            figures.append({"name": "tree_refresh", "n": args.n, "changed": args.changed,
                            "seconds": round(median, 3), "samples": [round(s, 3) for s in samples],
                            "target": TARGET_S, "meets_target": median < TARGET_S})
            errors = page.evaluate("() => window.__pageErrors")
            if args.screenshot:
                page.screenshot(path=args.screenshot)
            if errors:
                raise SystemExit(f"page errors: {errors}")
    for fig in figures:
        if args.json:
            print(json.dumps(fig))
        else:
            extra = ", ".join(f"{k}={v}" for k, v in fig.items() if k not in ("name", "seconds"))
            print(f"{fig['name']}: {fig['seconds']:.3f} s ({extra})")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    main()
