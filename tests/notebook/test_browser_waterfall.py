"""The Timeline view as a waterfall in a real JupyterLab (headless Chromium, :mod:`tests.notebook.lab`).

A continuable child runs two turns with a pause between them, and the root delegates once (model call,
``subagent`` tool call, model call). After a click on *Timeline*:

* a time axis with ticks: labels from ``0 s`` upward, at increasing positions;
* the child's lane has one bar per activation (two), with the pause between them visible as a gap
  of empty track, each with its model call inside;
* the root's lane has one bar holding its model, tool and model spans, in that order;
* a child still running has a running bar (to now) with its model call in flight;
* a click on a bar lists that turn's calls; a click on the root's tool span shows that call's messages
  (its arguments and the child's answer, fetched from the kernel);
* both themes draw it (screenshots ``waterfall-*.png`` of the page and ``timeline-*.png`` of the view, light
  and dark, in the test's temp dir), and the page records no JavaScript error.
"""

from __future__ import annotations

import pytest

from . import lab

PAUSE = 1.5  # seconds between the child's two turns

CELLS = [
    "import asyncio, time\nimport toh_nb as tn",
    "async def reply(request):\n"
    "    await asyncio.sleep(60 if request.label == 'hold on' else 0.3)\n"
    "    if request.label is None and request.messages[-1].role == 'user':\n"
    "        return tn.ModelResponse(tool_calls=[tn.ToolCall('subagent', {'description': 'facts', "
    "'prompt': 'Find two facts'})], usage=tn.Usage(400, 20))\n"
    "    return tn.ModelResponse(text=f\"{request.label or 'root'}: {request.last_user_text}\", "
    "usage=tn.Usage(1000, 100))\n"
    "hub = tn.Hub(tn.FunctionModel(reply, name='m'), ids='sequential')",
    'kid = hub.start("First draft", label="editor")\n'
    'kid.wait(timeout=10)\n'
    f'time.sleep({PAUSE})\n'
    'kid.send("Second pass")\n'
    'kid.wait(timeout=10)\n'
    'print(hub.run("Plan it").text)',
    'hold = hub.start("Wait", label="hold on")\ntree = hub.tree()\ntree',
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

WATERFALL_JS = """(output) => {
    const box = (el) => { const r = el.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width}; };
    const lane = (id) => {
        const el = output.querySelector(`.toh-lane[data-id="${id}"]`);
        if (!el) return null;
        return {acts: [...el.querySelectorAll('.toh-act')].map((a) => ({...box(a), cls: a.className,
                    spans: [...a.querySelectorAll('.toh-span')].map((s) => ({...box(s), cls: s.className, title: s.title}))})),
                track: box(el.querySelector('.toh-lane-track'))};
    };
    return {ticks: [...output.querySelectorAll('.toh-wf-tick')].map((t) => ({label: t.textContent,
                t: Number(t.dataset.t), ...box(t)})),
            child: lane('agent-1'), root: lane('root')};
}"""


def test_timeline_is_a_waterfall_with_an_axis_and_one_bar_per_activation(tmp_path):
    reason = lab.missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect

    with lab.lab_page(tmp_path, CELLS) as (page, server), lab.reported(page, server, tmp_path / "failure.png"):
        lab.run_all(page)
        output = page.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-Cell-outputArea")
        tree = output.locator(".toh-tree")  # the widget's own view, not the static snapshot beside it
        expect(tree.locator(".toh-row")).to_have_count(4)  # root, the child, the one-shot helper, "hold on"
        tree.locator("button.toh-view-timeline").click()
        expect(tree.locator('.toh-lane[data-id="agent-1"] .toh-act')).to_have_count(2)
        seen = page.evaluate(WATERFALL_JS, output.element_handle())

        # the axis: ticks from 0 s upward, left to right, covering the pause
        ticks = seen["ticks"]
        assert len(ticks) >= 3, ticks
        assert ticks[0]["label"] == "0 s", ticks
        assert all(a["t"] < b["t"] and a["left"] < b["left"] for a, b in zip(ticks, ticks[1:])), ticks
        assert ticks[-1]["t"] >= PAUSE, ticks
        assert all(tick["label"].endswith(" s") or "min" in tick["label"] for tick in ticks), ticks

        # the child: two activations with the pause between them as empty track, a model call in each
        first, second = seen["child"]["acts"]
        track = seen["child"]["track"]
        # the track spans the axis (less than one tick step past the last tick), the gap at least the pause
        step = ticks[1]["t"] - ticks[0]["t"]
        gap = second["left"] - first["right"]
        assert gap / track["width"] >= 0.95 * PAUSE / (ticks[-1]["t"] + step), (first, second, track, ticks)
        for act in (first, second):
            assert "toh-act-completed" in act["cls"], act
            assert [span["cls"].split()[1] for span in act["spans"]] == ["toh-span-model"], act
            assert act["spans"][0]["title"].startswith("model call · "), act
            assert act["spans"][0]["title"].endswith(" · 1000 in / 100 out"), act

        # the root: one activation with its model call, the subagent call and the closing model call
        (root,) = seen["root"]["acts"]
        kinds = [span["cls"].split()[1] for span in root["spans"]]
        assert kinds == ["toh-span-model", "toh-span-tool", "toh-span-model"], root
        assert root["spans"][1]["title"].startswith("tool subagent · "), root
        assert root["spans"][0]["right"] <= root["spans"][1]["left"] + 1 <= root["spans"][2]["left"] + 2, root

        # a child still running: its bar runs to now (dashed), its model call in flight
        holding = tree.locator('.toh-lane[data-id="agent-3"]')
        expect(holding.locator(".toh-act.toh-act-running")).to_have_count(1)
        expect(holding.locator(".toh-span-model.toh-span-running")).to_have_count(1)

        # a click on a bar (below its model call): the turn and its calls
        tree.locator('.toh-lane[data-id="agent-1"] .toh-act').nth(1).click(position={"x": 3, "y": 21})
        detail = tree.locator(".toh-wf-detail")
        expect(detail.locator(".toh-wf-detail-head b")).to_contain_text("editor turn 2 · ")
        expect(detail.locator(".toh-wf-detail-head b")).to_contain_text(" · completed · 1000 in / 100 out · 1 call")
        expect(detail.locator(".toh-wf-spans li")).to_have_count(1)
        expect(detail.locator(".toh-wf-spans li").first).to_contain_text("model call · ")

        # a click on the tool span: that call's messages
        tree.locator('.toh-lane[data-id="root"] .toh-span-tool').click()
        expect(detail.locator(".toh-wf-detail-head b")).to_contain_text("root (you) turn 1 · tool subagent · ")
        expect(detail.locator(".toh-wf-msg-call pre")).to_have_text('{"description": "facts", "prompt": "Find two facts"}')
        expect(detail.locator(".toh-wf-msg-result pre")).to_have_text("facts: Find two facts")
        page.screenshot(path=str(tmp_path / "waterfall-light.png"))
        tree.locator(".toh-timeline").screenshot(path=str(tmp_path / "timeline-light.png"))

        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_timeout(500)
        page.screenshot(path=str(tmp_path / "waterfall-dark.png"))
        tree.locator(".toh-timeline").screenshot(path=str(tmp_path / "timeline-dark.png"))
        expect(tree.locator('.toh-lane[data-id="agent-1"] .toh-act')).to_have_count(2)
