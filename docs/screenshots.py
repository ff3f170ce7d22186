"""Re-make the pictures of the docs: ``python docs/screenshots.py`` (needs Chromium, JupyterLab, Playwright).

``docs/images/tree.png`` is the live tree in a real JupyterLab in headless Chromium (the harness of the
browser tests, ``tests/notebook/lab.py``), after the README's example: the offline ``DemoModel``'s
delegation (parallel children, a grandchild, a background job) and a continuable child. Not part of
the site (mkdocs.yml excludes it) nor of the test suite; run it after changing how the tree looks.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.notebook import lab  # noqa: E402  (the shared JupyterLab + Chromium harness)

CELLS = [
    "import toh_nb as tn\n"
    "hub = tn.Hub(ids='sequential', prices={'demo': (0.15, 0.60)})\n"
    "print(hub.run('Plan a small vegetable garden').text[:60])",
    "kid = hub.start('You keep the garden notes', label='notes')\n"
    "kid.wait(timeout=30)\n"
    "tree = hub.tree()\n"
    "tree",
]


def tree_png(out: pathlib.Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, lab.lab_page(pathlib.Path(tmp), CELLS,
                                                           viewport={"width": 1600, "height": 900}) as (page, _):
        lab.run_cell(page, 0)
        lab.run_cell(page, 1)
        tree = page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".toh-tree")
        tree.locator(".toh-row", has_text="notes").wait_for()
        page.wait_for_timeout(500)  # the last refresh of the rows
        page.evaluate("() => window.jupyterapp.commands.execute('application:toggle-left-area')")
        page.wait_for_timeout(800)  # the notebook takes the whole width: every column of the rows shows
        tree.screenshot(path=str(out))


if __name__ == "__main__":
    missing = lab.missing()
    if missing:
        sys.exit(missing)
    target = ROOT / "docs" / "images" / "tree.png"
    tree_png(target)
    print(f"wrote {target}")
