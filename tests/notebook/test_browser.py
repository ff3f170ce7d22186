"""The live agent tree (``hub.tree()``) rendered by a real JupyterLab in a real (headless) Chromium.

End to end: a small notebook is written into a temp dir, ``jupyter lab`` from this interpreter serves it
on 127.0.0.1 (free port, no token, every Jupyter config/runtime/settings/workspaces dir in the temp dir),
Playwright drives the system Chromium (``/usr/bin/chromium``; never a downloaded browser) to open it in a
fresh workspace, run all cells once the kernel is idle, and then checks the widget's rendered DOM:

* the tree is drawn by the ipywidgets renderer (not the ``text/plain`` fallback): the node of the
  continuable child shows its label ``editor``, its id ``agent-1`` and a coloured status badge, and has
  its *Send* button and message box;
* typing a message and clicking *Send* reaches the kernel and the engine: the tree's message line shows
  the tool's reply ``message queued as the next turn for subagent agent-1`` and the node moves on to its
  second turn;
* no uncaught JavaScript error or unhandled rejection happens in the page (this caught a race: the
  transient progress line of ``kid.wait()`` closed its widget models while the page was still drawing
  them; progress.py now closes them a few seconds after emptying the display).

A screenshot is saved in the temp dir in every case; a failing assertion names its path and the server
log. Skipped only when the system Chromium or the ``playwright`` / ``jupyterlab`` packages are missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_TIMEOUT = 30.0  # s until /api/status answers
UI_TIMEOUT_MS = 30_000  # per wait in the page (JupyterLab load, kernel start, run, widget render)
REPLY = "message queued as the next turn for subagent agent-1"
BADGE_STATUSES = ("running", "idle", "ready", "finished", "completed", "stopping", "killed", "failed", "corrupt")

CELLS = [
    "import toh_nb as tn",
    'hub = tn.Hub(ids="sequential")',
    'kid = hub.start("You edit texts", label="editor")',
    "kid.wait(timeout=10)",
    "hub.tree()",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"no system Chromium at {CHROMIUM} (Debian package 'chromium'); `playwright install` is not used"
    for module, package in (("playwright.sync_api", "playwright"), ("jupyterlab", "jupyterlab")):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"the Python package '{package}' is not installed in {sys.prefix} (pip install '.[dev]')"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_notebook(path: pathlib.Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {},
              "outputs": [], "source": source} for i, source in enumerate(CELLS)]
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                      "name": "python3"},
                       "language_info": {"name": "python"}}}
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")


class LabServer:
    def __init__(self, proc: subprocess.Popen, url: str, log: pathlib.Path) -> None:
        self.proc = proc
        self.url = url
        self.log = log

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server we started, by its own pid only."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def lab(tmp_path):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path / "notebooks"
    root.mkdir()
    _write_notebook(root / "tree.ipynb")
    env = dict(os.environ)
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"), ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces")):
        (tmp_path / sub).mkdir()
        env[var] = str(tmp_path / sub)
    env.pop("JUPYTER_TOKEN", None)
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    # no "receive official Jupyter news?" toast over the page
    news = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--PasswordIdentityProvider.hashed_password=",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.extension_manager=readonly", "--allow-root"]
    log = tmp_path / "jupyter-lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    server = LabServer(proc, url, log)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode} before serving:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer {url}/api/status within {SERVER_START_TIMEOUT} s:\n"
                            f"{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        _stop(proc)


KERNEL_IDLE_JS = """() => {
    const app = window.jupyterapp;
    const w = app && app.shell && app.shell.currentWidget;
    const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!(kernel && kernel.status === 'idle' && w.content && w.content.widgets.length === %d);
}""" % len(CELLS)

# uncaught errors and unhandled rejections in the page, each noting whether the tree (the VBox in the last
# cell's output) had started to render at that moment
RECORD_ERRORS_JS = """(() => {
    window.__pageErrors = [];
    const record = (reason) => {
        const cells = document.querySelectorAll('.jp-Notebook .jp-CodeCell');
        const last = cells.length === %d ? cells[cells.length - 1] : null;
        window.__pageErrors.push({
            message: String(reason && reason.message !== undefined ? reason.message : reason),
            stack: String((reason && reason.stack) || ''),
            treeShown: !!(last && last.querySelector('.jp-OutputArea-output .widget-vbox'))});
    };
    window.addEventListener('error', (event) => record(event.error || event.message));
    window.addEventListener('unhandledrejection', (event) => record(event.reason));
})();""" % len(CELLS)

# the node header of agent-1 as the browser drew it: label, id and badge from the widget's HTML
NODE_JS = """(output) => {
    for (const html of output.querySelectorAll('.widget-html-content')) {
        const code = html.querySelector('code');
        if (!code || code.textContent !== 'agent-1') continue;
        const label = html.querySelector('b');
        const badge = code.nextElementSibling;
        return {label: label ? label.textContent : null,
                badge: badge && badge.tagName === 'SPAN' ? badge.textContent : null,
                badgeBackground: badge ? getComputedStyle(badge).backgroundColor : null,
                text: html.innerText};
    }
    return null;
}"""


def test_agent_tree_renders_and_sends_in_jupyterlab(lab, tmp_path):
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright

    shot = tmp_path / "agent-tree.png"
    started = time.monotonic()

    def where() -> str:
        return f"\nscreenshot: {shot}\nserver log ({lab.log}):\n{lab.log_tail()}"

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            page.add_init_script(RECORD_ERRORS_JS)
            try:
                page.goto(f"{lab.url}/lab/workspaces/t-{uuid.uuid4().hex[:8]}/tree/tree.ipynb?reset")
                page.wait_for_function(KERNEL_IDLE_JS, polling=200)
                news = page.locator("button:text-is('No'):visible")  # in case the settings did not apply
                if news.count():
                    news.first.click()
                page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

                cells = page.locator(".jp-Notebook .jp-CodeCell")
                expect(cells).to_have_count(len(CELLS))
                output = cells.nth(len(CELLS) - 1).locator(".jp-Cell-outputArea")
                # the ipywidgets view, not the text/plain fallback
                tree = output.locator(".widget-vbox").first
                expect(tree).to_contain_text("agent tree")
                expect(tree).to_contain_text("editor")
                expect(tree).to_contain_text("agent-1")

                node = output.element_handle().evaluate(NODE_JS)
                assert node is not None, "no node header with id agent-1 in the widget"
                assert node["label"] == "editor", f"node label: {node}"
                assert node["badge"] in BADGE_STATUSES, f"node status badge: {node}"
                assert node["badgeBackground"] not in (None, "", "rgba(0, 0, 0, 0)"), f"the badge has no colour: {node}"
                header = output.locator(".widget-html-content:has(code:text-is('agent-1'))")
                expect(header).to_contain_text("turns 1")

                box = output.locator("input[placeholder='message for agent-1']")
                send = output.locator("button.widget-button", has_text="Send")
                expect(box).to_be_enabled()
                expect(send).to_be_enabled()
                box.fill("Please tighten the intro")
                send.click()
                expect(output).to_contain_text(REPLY)
                # the engine ran the queued message as the child's second turn; the tree shows it
                expect(header).to_contain_text("turns 2")
                errors = page.evaluate("() => window.__pageErrors")
                assert errors == [], f"uncaught JavaScript errors in the page: {errors}"
            except (AssertionError, PlaywrightError) as error:
                try:
                    page.screenshot(path=str(shot), full_page=True)
                except PlaywrightError:
                    pass
                raise AssertionError(f"{error}{where()}") from error
            page.screenshot(path=str(shot), full_page=True)
        finally:
            context.close()
    assert shot.exists()
    print(f"browser check took {time.monotonic() - started:.1f} s; screenshot {shot}")
