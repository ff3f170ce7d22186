"""A tutorial after Run All in a real JupyterLab (headless Chromium, :mod:`tests.notebook.lab`): its trees
are live, not snapshots.

Tutorial 02 (background jobs) is opened with its stored outputs, cleared and run with Run All, as a
reader would. Then:

* both trees on the page are live views (the stored snapshot beside each is hidden);
* the first shows the crawl that a later cell killed as ``killed`` (``aborted``), with no Kill button;
* the survey job the last cell leaves running has a **Kill** button; a click kills it (the hub is still
  open: the tutorial does not close it) and both views show it ``killed``;
* screenshots of the page, light and dark (``tutorial-02-*.png`` in the test's temp dir); no JavaScript
  error in the page.
"""

from __future__ import annotations

import pathlib

import pytest

from . import lab

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "02_background_jobs.ipynb"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]


def test_tutorial_02_after_run_all_shows_live_trees_whose_kill_button_works(tmp_path):
    reason = lab.missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect

    with lab.lab_page(tmp_path, [], name=TUTORIAL.name, source=TUTORIAL) as (page, server):
        with lab.reported(page, server, tmp_path / "failure.png"):
            lab.run_all_fresh(page)
            trees = page.locator(".toh-tree")
            expect(trees).to_have_count(2)
            first, last = trees.nth(0), trees.nth(1)
            for tree in (first, last):
                expect(tree.locator(".toh-row")).to_have_count(9)  # root, 4 jobs, their 4 agents
            crawl = first.locator('.toh-row[data-id="subagent-3"]')
            expect(crawl.locator(".toh-badge")).to_have_text("killed")
            expect(crawl.locator("button.toh-kill")).to_have_count(0)
            expect(first.locator('.toh-row[data-id="agent-3"] button.toh-outcome')).to_have_text("aborted")
            visible = page.locator(".toh-tree-fallback").evaluate_all("els => els.map((e) => e.offsetParent !== null)")
            assert visible == [False, False], "a stored snapshot shows beside its live view"
            survey = last.locator('.toh-row[data-id="subagent-4"]')
            expect(survey.locator(".toh-badge")).to_have_text("running")
            last.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "tutorial-02-light.png"))
            survey.locator("button.toh-kill").click()
            for tree in (first, last):
                expect(tree.locator('.toh-row[data-id="subagent-4"] .toh-badge')).to_have_text("killed")
                expect(tree.locator('.toh-row[data-id="agent-4"] .toh-badge')).to_have_text("killed")
            expect(survey.locator("button.toh-kill")).to_have_count(0)
            page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                          "{theme: 'JupyterLab Dark'})")
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
            page.wait_for_timeout(500)
            last.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "tutorial-02-dark.png"))
