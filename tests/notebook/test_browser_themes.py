"""The tree's looks in a real JupyterLab (headless Chromium, :mod:`tests.notebook.lab`): light and dark
themes, how things ended, and a narrow tree.

* Every colour comes from the theme: after ``apputils:change-theme`` to *JupyterLab Dark* the buttons,
  the chat bubbles and the rows' text change colour with the theme and keep their contrast (WCAG ratio
  ≥ 4.5 for text on buttons and bubbles).
* An errored one-shot child shows ``failed`` with an ``error`` mark carrying its diagnostic (hover
  title; a click expands it under the row); an interrupted continuable child shows ``ready · aborted``;
  the root shows the failures below it; *collapse finished* keeps the failure in sight and its caret
  folded (▸).
* At 1280 px with the file browser open, rows drop cost first (then time, then tokens), and every fact
  stays in the facts' hover title.

Screenshots of both themes are saved in the test's temp dir. Skipped without Chromium/playwright/jupyterlab.
"""

from __future__ import annotations

import pytest

from . import lab

CELLS = [
    "import asyncio\nimport toh_nb as tn",
    "async def reply(request):\n"
    "    label = request.label or 'root'\n"
    "    if label.startswith('hold'):\n"
    "        await asyncio.sleep(60)\n"
    "    if label == 'checker':\n"
    "        raise RuntimeError('the check could not reach its source')\n"
    "    return tn.ModelResponse(text=f'{label}: {request.last_user_text}', usage=tn.Usage(1000, 100))\n"
    "hub = tn.Hub(tn.FunctionModel(reply, name='m'), ids='sequential', prices={'m': (1.0, 2.0)})",
    'kid = hub.start("You edit long texts about many things", label="editor of the long chapters")\n'
    'kid.wait(timeout=10)\n'
    'hold = hub.start("wait", label="hold on")\n'
    'import time; time.sleep(0.5); hold.interrupt(); hold.wait(timeout=10)\n'
    'hub.spawn("check it", label="checker", check=False)\n'
    'None',
    "tree = hub.tree()\ntree",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

COLOURS_JS = """(output) => {
    const css = (el, prop) => el ? getComputedStyle(el)[prop] : null;
    const button = output.querySelector('button.toh-transcript');
    const user = output.querySelector('.toh-msg-user');
    const assistant = output.querySelector('.toh-msg-assistant');
    const row = output.querySelector('.toh-row[data-id="agent-1"] .toh-name');
    return {button: [css(button, 'color'), css(button, 'backgroundColor')],
            user: [css(user, 'color'), css(user, 'backgroundColor')],
            assistant: [css(assistant, 'color'), css(assistant, 'backgroundColor')],
            name: [css(row, 'color')]};
}"""

FACTS_JS = """([output, id]) => {
    const facts = output.querySelector(`.toh-row[data-id="${id}"] .toh-facts`);
    const shown = [...facts.querySelectorAll('.toh-fact')].filter((f) => getComputedStyle(f).display !== 'none');
    return {title: facts.title, shown: shown.map((f) => f.textContent).join(''),
            cut: facts.scrollWidth > facts.clientWidth};
}"""


def rgb(text: str) -> tuple[float, ...]:
    """``rgb(r, g, b)`` / ``rgba(…)`` or ``color(srgb r g b)`` (what color-mix computes to) as 0–255."""
    inner = text[text.index("(") + 1:text.index(")")]
    if text.startswith("color("):
        return tuple(float(v) * 255 for v in inner.split()[1:4])
    return tuple(float(v) for v in inner.split(",")[:3])


def luminance(colour: tuple[float, ...]) -> float:
    def channel(v: float) -> float:
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(v) for v in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    a, b = sorted((luminance(rgb(fg)), luminance(rgb(bg))), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_light_and_dark_themes_outcomes_and_a_narrow_tree(tmp_path):
    reason = lab.missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect

    with lab.lab_page(tmp_path, CELLS, viewport={"width": 1280, "height": 900}) as (page, server):
        with lab.reported(page, server, tmp_path / "failure.png"):
            lab.run_all(page)
            output = page.locator(".jp-Cell-outputArea").last  # the live view and the snapshot beside it
            tree = output.locator(".toh-tree")
            expect(tree.locator(".toh-row")).to_have_count(4)
            page.evaluate("() => window.jupyterapp.commands.execute('filebrowser:activate')")
            handle = output.element_handle()
            # how things ended
            checker = tree.locator('.toh-row[data-id="agent-3"]')
            expect(checker.locator(".toh-badge")).to_have_text("failed")
            expect(checker.locator("button.toh-outcome")).to_have_text("error")
            expect(checker.locator("button.toh-outcome")).to_have_attribute(
                "title", "the check could not reach its source")
            expect(tree.locator('.toh-row[data-id="agent-2"] button.toh-outcome')).to_have_text("aborted")
            expect(tree.locator('.toh-row[data-id="root"] .toh-failures-below')).to_have_text("\u26a0 1")
            checker.locator("button.toh-outcome").click()
            expect(tree.locator('.toh-diagnostic[data-for="agent-3"]')).to_have_text(
                "the check could not reach its source")
            # narrow: the continuable row drops cost (then time) instead of cutting its facts to "…"
            facts = page.evaluate(FACTS_JS, [handle, "agent-1"])
            assert "cost" in facts["title"] and " s" in facts["title"] and "1000 in / 100 out" in facts["title"]
            assert "cost" not in facts["shown"] and " s" not in facts["shown"], facts  # dropped, on hover
            # collapse finished keeps the failure (the root is idle: open); the caret follows the fold
            tree.locator('.toh-row[data-id="agent-1"] button.toh-transcript').click()
            expect(tree.locator(".toh-chat .toh-msg-assistant").first).to_be_visible()
            page.screenshot(path=str(tmp_path / "light.png"))
            light = page.evaluate(COLOURS_JS, handle)
            page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', "
                          "{theme: 'JupyterLab Dark'})")
            page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
            page.wait_for_timeout(500)
            page.screenshot(path=str(tmp_path / "dark.png"))
            dark = page.evaluate(COLOURS_JS, handle)
            for part in ("button", "user", "assistant"):
                assert dark[part][1] != light[part][1], (part, light, dark)  # the background follows the theme
                assert luminance(rgb(dark[part][1])) < luminance(rgb(light[part][1])), (part, light, dark)
                for theme in (light, dark):
                    assert contrast(*theme[part]) >= 4.5, (part, theme)
            assert dark["name"] != light["name"]
