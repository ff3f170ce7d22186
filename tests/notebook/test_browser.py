"""The live agent tree (``hub.tree()``, one anywidget model) in a real JupyterLab in headless Chromium.

End to end through :mod:`tests.notebook.lab`: a small notebook builds a tree (a continuable child, a
one-shot child and a background job that runs until killed), runs in JupyterLab, and the test drives
the rendered widget like a user:

* the tree is drawn by the widget's ES module (not the static fallback): the row of the continuable
  child shows its label ``editor``, its id ``agent-1`` and a coloured status badge;
* typing a message and clicking *Send* reaches the kernel and the engine: the tree's message line shows
  the tool's reply ``message queued as the next turn for subagent agent-1`` and the row moves on to its
  second turn;
* the search box and the status filter narrow the rows (ancestors of matches stay);
* *Kill* on the job's row stops it; *Transcript* opens the chat view; *Timeline* draws one lane per
  visible row, with a bar per activation;
* no uncaught JavaScript error or unhandled rejection happens in the page.

A screenshot is saved in the temp dir in every case; a failing assertion names its path and the server
log. Skipped only when the system Chromium or the ``playwright`` / ``jupyterlab`` packages are missing.
"""

from __future__ import annotations

import time

import pytest

from . import lab

REPLY = "message queued as the next turn for subagent agent-1"
KILLED = "requested cancellation of job subagent-1"
BADGE_STATUSES = ("running", "stopping", "idle", "ready", "completed", "failed", "killed", "corrupt")

CELLS = [
    "import asyncio\nimport toh_nb as tn",
    "async def reply(request):\n"
    "    if (request.label or '').startswith('slow'):\n"
    "        await asyncio.sleep(60)\n"
    "    return f\"{request.label or 'root'}: {request.last_user_text}\"\n"
    "hub = tn.Hub(tn.FunctionModel(reply), ids='sequential')",
    'kid = hub.start("You edit texts", label="editor")\nkid.wait(timeout=10)',
    'hub.spawn("Sum it up", label="summary")\njob = hub.spawn("Crawl", label="slow crawler", background=True)',
    "hub.tree()",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

ROW_JS = """([output, id]) => {
    const row = output.querySelector(`.toh-row[data-id="${id}"]`);
    if (!row) return null;
    const badge = row.querySelector('.toh-badge');
    return {name: row.querySelector('.toh-name').textContent, id: row.querySelector('.toh-id').textContent,
            title: row.querySelector('.toh-id').title, badge: badge ? badge.textContent : null,
            badgeBackground: badge ? getComputedStyle(badge).backgroundColor : null, text: row.innerText};
}"""


def browser_expect(acp: bool = False):
    """Playwright's ``expect``, or skip with the reason: no Chromium/JupyterLab here, or (``acp``) no
    ACP extra."""
    reason = lab.missing()
    if reason:
        pytest.skip(reason)
    if acp:
        pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")
    from playwright.sync_api import expect

    return expect


def test_agent_tree_buttons_filters_and_timeline_in_jupyterlab(tmp_path):
    expect = browser_expect()

    shot = tmp_path / "agent-tree.png"
    started = time.monotonic()
    with lab.lab_page(tmp_path, CELLS) as (page, server), lab.reported(page, server, shot):
        lab.run_all(page)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        expect(cells).to_have_count(len(CELLS))
        output = cells.nth(len(CELLS) - 1).locator(".jp-Cell-outputArea")
        tree = output.locator(".toh-tree")  # the widget's own view, not the static fallback
        expect(tree).to_contain_text("agent tree")
        rows = tree.locator(".toh-row")
        expect(rows).to_have_count(5)  # root, editor, summary, the job and its child
        editor = tree.locator('.toh-row[data-id="agent-1"]')
        node = page.evaluate(ROW_JS, [output.element_handle(), "agent-1"])
        assert node is not None, "no row for agent-1 in the widget"
        assert (node["name"], node["id"], node["title"]) == ("editor", "agent-1", "agent-1 (click to copy)"), node
        assert node["badge"] in BADGE_STATUSES, node
        assert node["badgeBackground"] not in (None, "", "rgba(0, 0, 0, 0)"), f"the badge has no colour: {node}"
        expect(editor).to_contain_text("turns 1")
        expect(tree.locator('.toh-row[data-id="root"]')).to_contain_text("root (you)")

        # Send: the message reaches the engine; the row shows the second turn
        editor.locator(".toh-send-text").fill("Please tighten the intro")
        editor.locator("button.toh-send-button").click()
        expect(tree.locator(".toh-message")).to_have_text(REPLY)
        expect(editor).to_contain_text("turns 2")

        # search and status filter
        tree.locator("input.toh-search").fill("summ")
        expect(rows).to_have_count(2)
        expect(tree.locator('.toh-row[data-id="agent-2"]')).to_contain_text("summary")
        tree.locator("input.toh-search").fill("")
        expect(rows).to_have_count(5)
        tree.locator("select.toh-status-filter").select_option("running")
        expect(rows).to_have_count(3)  # root (the ancestor), the job and its child
        expect(tree.locator('.toh-row[data-id="subagent-1"]')).to_be_visible()

        # Kill the running job; the filter then has no running rows left
        tree.locator('.toh-row[data-id="subagent-1"] button.toh-kill').click()
        expect(tree.locator(".toh-message")).to_have_text(KILLED)
        expect(rows).to_have_count(0)
        tree.locator("select.toh-status-filter").select_option("")
        expect(tree.locator('.toh-row[data-id="subagent-1"] .toh-badge')).to_have_text("killed")
        expect(tree.locator('.toh-row[data-id="subagent-1"] button.toh-kill')).to_have_count(0)

        # collapse the root: only it stays; expand again
        tree.locator('.toh-row[data-id="root"] button.toh-caret').click()
        expect(rows).to_have_count(1)
        tree.locator('.toh-row[data-id="root"] button.toh-caret').click()
        expect(rows).to_have_count(5)

        # the chat view of a transcript
        editor.locator("button.toh-transcript").click()
        chat = tree.locator(".toh-chat")
        expect(chat).to_contain_text("conversation of editor (agent-1)")
        expect(chat.locator(".toh-msg-user").first).to_contain_text("You edit texts")
        expect(chat.locator(".toh-msg-user").nth(1)).to_contain_text("Please tighten the intro")

        # the timeline: a lane and a bar per row
        tree.locator("button.toh-view-timeline").click()
        # the selected view stays readable under the pointer (white on dark blue, not the hover grey)
        expect(tree.locator("button.toh-view-timeline")).to_have_css("background-color", "rgb(25, 118, 210)")  # --jp-brand-color1
        expect(tree.locator(".toh-lane")).to_have_count(5)
        expect(tree.locator(".toh-rows")).to_be_hidden()
        # a bar per activation: the editor's two turns are two bars (the waterfall: test_browser_waterfall.py)
        expect(tree.locator('.toh-lane[data-id="agent-1"] .toh-act')).to_have_count(2)
        widths = page.evaluate("""(tree) => [...tree.querySelectorAll('.toh-act')]
            .map((bar) => bar.getBoundingClientRect().width)""", tree.element_handle())
        assert len(widths) >= 5 and all(w > 0 for w in widths), widths
        page.screenshot(path=str(shot), full_page=True)
        tree.locator("button.toh-view-tree").click()
        expect(tree.locator(".toh-rows")).to_be_visible()

    assert shot.exists()
    print(f"browser check took {time.monotonic() - started:.1f} s; screenshot {shot}")


def ask_cells(work) -> list[str]:
    from ..acp.helpers import fake

    return [
        "import toh_nb as tn",
        f"coder = tn.AcpAgent({fake()!r}, cwd={str(work)!r}, permissions='ask')\n"
        "hub = tn.Hub(ids='sequential', providers={'coder': coder})\n"
        f"job = hub.spawn('WRITE {work}/out.txt hello', label='writer', provider='coder', background=True)",
        "hub.tree()",
    ]


def test_an_acp_permission_request_is_answered_with_its_allow_button(tmp_path):
    """``permissions="ask"``: the request shows as a prompt in the tree; Allow lets the agent write."""
    expect = browser_expect(acp=True)

    work = tmp_path / "work"
    work.mkdir()
    cells = ask_cells(work)
    shot = tmp_path / "agent-tree-ask.png"
    with lab.lab_page(tmp_path, cells) as (page, server), lab.reported(page, server, shot):
        lab.run_all(page)
        output = page.locator(".jp-Notebook .jp-CodeCell").nth(len(cells) - 1).locator(".jp-Cell-outputArea")
        tree = output.locator(".toh-tree")
        ask = tree.locator(".toh-ask")
        expect(ask).to_have_count(1)
        expect(ask).to_contain_text(f"agent-1 asks permission: Write {work}/out.txt (edit)")
        page.screenshot(path=str(shot), full_page=True)
        ask.locator("button.toh-allow").click()
        expect(tree.locator(".toh-message")).to_have_text(f"allowed: Write {work}/out.txt (agent-1)")
        expect(ask).to_have_count(0)
        expect(tree.locator('.toh-row[data-id="subagent-1"] .toh-badge')).to_have_text("completed")
        assert (work / "out.txt").read_text() == "hello"


def live_cells(work) -> list[str]:
    from ..acp.helpers import fake

    return [
        "import asyncio\nimport toh_nb as tn",
        ("async def slow(request):\n"
         "    await asyncio.sleep(120)\n"
         "    return 'slow answer'\n"
         f"coder = tn.AcpAgent({fake()!r}, cwd={str(work)!r}, permissions='ask')\n"
         "root = tn.ScriptedModel({'root': [[tn.ToolCall('coder', {'description': 'writer', "
         f"'prompt': 'WRITE {work}/out.txt hello'}})], 'writer done', 'noted', 'noted', 'noted']}})\n"
         "hub = tn.Hub(root, ids='sequential', providers={'coder': coder},\n"
         "             tools=[tn.SubagentTool(name='coder', provider='coder')])\n"
         "kid = hub.start('work', label='slow', model=tn.FunctionModel(slow))"),
        "hub.tree()",
        ("result = hub.run('go')\n"
         f"print('cell done:', result.text, '|', kid.status, '|', open({str(work)!r} + '/out.txt').read())"),
    ]


KERNEL_STATUS_JS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"

CLICK_JS = """(button) => {
    button.click();  // the state right after the click, before any answer from the kernel can arrive
    return {pending: button.classList.contains('toh-pending'), disabled: button.disabled,
            busy: button.getAttribute('aria-busy')};
}"""


ROUTED_CELL = "from toh_nb.notebook import kernel_routing\nprint('routed:', kernel_routing.status()['routed'])"


@pytest.mark.parametrize("comms", ["perCommTarget", "disabled"])
def test_interrupt_and_allow_take_effect_while_a_foreground_run_blocks_the_cell(tmp_path, comms):
    """Issue 27 §1: while ``hub.run`` blocks the cell (its root waits for an ACP child that asks
    permission), Interrupt on another child stops that child's turn and Allow answers the ask — both
    before the cell ends. A click marks its button pending at once; its outcome shows in the row.

    ``comms``: JupyterLab's ``commsOverSubshells`` setting. By default JupyterLab sends the tree's
    messages on a subshell of its own; ``disabled`` sends them on the main shell, as VS Code and
    Notebook 7 without subshells do, and the kernel moves them to toh_nb's subshell while the cell runs
    (:mod:`toh_nb.notebook.kernel_routing`): the last cell reads how many it moved."""
    expect = browser_expect(acp=True)

    work = tmp_path / "work"
    work.mkdir()
    cells = [*live_cells(work), ROUTED_CELL]
    shot = tmp_path / f"agent-tree-live-{comms}.png"
    settings = {"@jupyterlab/apputils-extension:kernels-settings": {"commsOverSubshells": comms}}
    with lab.lab_page(tmp_path, cells, settings=settings) as (page, server), lab.reported(page, server, shot):
        for index in range(3):
            lab.run_cell(page, index)
        notebook_cells = page.locator(".jp-Notebook .jp-CodeCell")
        tree = notebook_cells.nth(2).locator(".jp-Cell-outputArea .toh-tree")
        slow = tree.locator('.toh-row[data-id="agent-1"]')
        expect(slow.locator(".toh-badge")).to_have_text("running")
        lab.start_cell(page, 3)  # hub.run blocks this cell until the ask is answered
        blocked = notebook_cells.nth(3)
        ask = tree.locator(".toh-ask")
        expect(ask).to_have_count(1)
        expect(ask).to_contain_text(f"asks permission: Write {work}/out.txt (edit)")
        expect(blocked.locator(".jp-InputPrompt")).to_have_text("[*]:")

        state = page.evaluate(CLICK_JS, slow.locator("button.toh-interrupt").element_handle())
        assert state == {"pending": True, "disabled": True, "busy": "true"}, state
        expect(slow.locator(".toh-click-result")).to_have_text("interrupt requested for agent agent-1")
        expect(tree.locator(".toh-message")).to_have_text("interrupt requested for agent agent-1")
        expect(slow.locator(".toh-badge")).to_have_text("ready")  # its turn ended: it waits for a message
        # the kernel indicator still says busy: the click's own idle is not taken for the kernel's
        time.sleep(0.5)
        assert [page.evaluate(KERNEL_STATUS_JS) for _ in range(3)] == ["busy"] * 3
        expect(slow.locator("button.toh-interrupt")).to_have_count(0)
        page.screenshot(path=str(shot), full_page=True)
        assert "cell done" not in blocked.locator(".jp-Cell-outputArea").inner_text()  # only its progress line
        expect(blocked.locator(".jp-InputPrompt")).to_have_text("[*]:")

        state = page.evaluate(CLICK_JS, ask.locator("button.toh-allow").element_handle())
        assert state == {"pending": True, "disabled": True, "busy": "true"}, state
        expect(tree.locator(".toh-message")).to_have_text(f"allowed: Write {work}/out.txt (agent-2)")
        expect(blocked.locator(".jp-Cell-outputArea")).to_contain_text("cell done: writer done | ready | hello")
        expect(blocked.locator(".jp-InputPrompt")).to_have_text("[4]:")
        lab.run_cell(page, 4)
        routed = notebook_cells.nth(4).locator(".jp-Cell-outputArea")
        expect(routed).to_contain_text("routed: ")
        moved = int(routed.inner_text().split("routed:")[1].split()[0])
        if comms == "disabled":  # the clicks came on the main shell and were moved while the cell ran
            assert moved >= 2, routed.inner_text()
        else:  # JupyterLab's own subshell: nothing to move
            assert moved == 0, routed.inner_text()


SENTENCE = "Also check the second chapter, please"

TYPING_CELLS = [
    "import asyncio\nimport time\nimport toh_nb as tn\nheard = []",
    ("async def pause() -> str:\n"
     "    \"\"\"Wait a moment.\"\"\"\n"
     "    await asyncio.sleep(0.5)\n"
     "    return 'ok'\n"
     "async def reply(request):\n"
     "    heard.append(request.last_user_text)\n"
     "    if request.label == 'typist' and len(request.messages) < 50:  # a long turn: a step every 0.5 s\n"
     "        return tn.ModelResponse(tool_calls=[tn.ToolCall('pause', {})], usage=tn.Usage(3, 2))\n"
     "    return f'got: {request.last_user_text}'\n"
     "hub = tn.Hub(tn.FunctionModel(reply), ids='sequential', tools=[pause])\n"
     "kid = hub.start('Wait for my notes', label='typist')"),
    "hub.tree()",
    ("deadline = time.time() + 60\n"
     f"while {SENTENCE!r} not in heard and time.time() < deadline:\n"
     "    time.sleep(0.2)\n"
     f"print('heard:', [text for text in heard if text.startswith('Also')])"),
]

TYPED_JS = """([output, id]) => {
    const row = output.querySelector(`.toh-row[data-id="${id}"]`);
    const box = row && row.querySelector('.toh-send-text');
    return {value: box ? box.value : null, focused: !!box && document.activeElement === box,
            facts: row ? row.querySelector('.toh-facts').textContent : null};
}"""


def test_text_typed_to_a_running_child_survives_its_row_changing(tmp_path):
    """Issue 27 §2: a running child's row changes every half second (each model step adds tokens);
    a sentence typed slowly into its Send box keeps its focus and every character across those
    refreshes, and Enter sends the whole sentence."""
    expect = browser_expect()

    shot = tmp_path / "agent-tree-typing.png"
    with lab.lab_page(tmp_path, TYPING_CELLS) as (page, server), lab.reported(page, server, shot):
        for index in range(3):
            lab.run_cell(page, index)
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        output = cells.nth(2).locator(".jp-Cell-outputArea")
        tree = output.locator(".toh-tree")
        row = tree.locator('.toh-row[data-id="agent-1"]')
        expect(row.locator(".toh-badge")).to_have_text("running")
        before = page.evaluate(TYPED_JS, [output.element_handle(), "agent-1"])
        box = row.locator(".toh-send-text")
        box.click()
        box.press_sequentially(SENTENCE, delay=90)  # about 3.5 s: several refreshes of this very row
        after = page.evaluate(TYPED_JS, [output.element_handle(), "agent-1"])
        assert after["facts"] != before["facts"], "the row did not change while typing: nothing was tested"
        assert after["value"] == SENTENCE and after["focused"], after
        expect(row.locator(".toh-badge")).to_have_text("running")
        page.screenshot(path=str(shot), full_page=True)
        box.press("Enter")
        expect(tree.locator(".toh-message")).to_have_text(REPLY)
        expect(box).to_have_value("")
        lab.run_cell(page, 3)
        expect(cells.nth(3).locator(".jp-Cell-outputArea")).to_contain_text(f"heard: [{SENTENCE!r}]")


SAVED_CELLS = [
    ("import asyncio\nimport toh_nb as tn\n"
     "async def reply(request):\n"
     "    if request.label == 'slow':\n"
     "        await asyncio.sleep(2)\n"
     "    return 'done'\n"
     "hub = tn.Hub(tn.FunctionModel(reply), ids='sequential')\n"
     "kid = hub.start('work', label='slow')"),
    "hub.tree()",
]

SAVED_OUTPUTS_JS = """() => {
    const nb = window.jupyterapp.shell.currentWidget.content;
    return nb.model.toJSON().cells[1].outputs.map((o) => (o.data || {})['text/plain'] || '');
}"""


def test_a_saved_notebook_reopens_with_the_trees_latest_snapshot_not_an_error(tmp_path):
    """Issue 27 §4: the tree's child finishes after the cell (the kernel idle), the notebook is saved
    with the tree still open, and reopened without the kernel that had the widget: the output shows the
    latest snapshot (``0 running``, ``ready``), not "Error displaying widget: model not found"."""
    expect = browser_expect()

    shot = tmp_path / "agent-tree-reopened.png"
    with lab.lab_page(tmp_path, SAVED_CELLS) as (page, server), lab.reported(page, server, shot):
        lab.run_cell(page, 0)
        lab.run_cell(page, 1)
        output = page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-Cell-outputArea")
        expect(output.locator('.toh-tree .toh-row[data-id="agent-1"] .toh-badge')).to_have_text("ready")
        expect(output.locator(".toh-tree")).to_be_visible()
        expect(output.locator(".toh-tree-fallback")).to_be_hidden()  # beside the live view: hidden
        page.wait_for_function(f"() => ({SAVED_OUTPUTS_JS})().some((t) => t.includes('(0 running)'))",
                               polling=200)
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.evaluate("() => window.jupyterapp.serviceManager.sessions.shutdownAll()")
        page.reload()
        page.wait_for_function(lab.KERNEL_IDLE_JS, arg=len(SAVED_CELLS), polling=200)
        output = page.locator(".jp-Notebook .jp-CodeCell").nth(1).locator(".jp-Cell-outputArea")
        snapshot = output.locator(".toh-tree-fallback")
        expect(snapshot).to_be_visible()
        expect(snapshot).to_contain_text("2 agents (0 running)")
        expect(snapshot).to_contain_text("ready")
        expect(output.locator(".toh-tree")).to_have_count(0)  # no kernel has the live view's model
        dead = output.get_by_text("Error displaying widget")
        expect(dead).to_have_count(1)  # JupyterLab says so in the live view's output …
        expect(dead).to_be_hidden()  # … which the snapshot hides
        page.screenshot(path=str(shot), full_page=True)
