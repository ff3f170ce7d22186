"""A real JupyterLab in a real headless Chromium, for the browser test and the tree benchmark.

:func:`lab_page` writes a notebook of the given cells into a temp dir, starts ``jupyter lab`` from this
interpreter on 127.0.0.1 (free port, no token, every Jupyter config/runtime/settings/workspaces dir in
the temp dir; the kernel imports ``toh_nb`` from this checkout through ``PYTHONPATH``), drives the
system Chromium (``/usr/bin/chromium``; never a downloaded browser) through Playwright to open the notebook in a fresh workspace once its kernel is idle, records uncaught page
errors in ``window.__pageErrors``, and stops the server by its own pid afterwards. :func:`missing` says
why it cannot run here (no Chromium, no playwright/jupyterlab), or None.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Iterator

CHROMIUM = pathlib.Path("/usr/bin/chromium")
#: the checkout whose toh_nb the notebook's kernel must import (the one these tests belong to)
SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_TIMEOUT = 30.0  # s until /api/status answers
UI_TIMEOUT_MS = 30_000  # per wait in the page (JupyterLab load, kernel start, run, widget render)

# uncaught errors and unhandled rejections in the page
RECORD_ERRORS_JS = """(() => {
    window.__pageErrors = [];
    const record = (reason) => window.__pageErrors.push({
        message: String(reason && reason.message !== undefined ? reason.message : reason),
        stack: String((reason && reason.stack) || '')});
    window.addEventListener('error', (event) => record(event.error || event.message));
    window.addEventListener('unhandledrejection', (event) => record(event.reason));
})();"""

KERNEL_IDLE_JS = """(cells) => {
    const app = window.jupyterapp;
    const w = app && app.shell && app.shell.currentWidget;
    const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!(kernel && kernel.status === 'idle' && w.content && w.content.widgets.length === cells);
}"""


def missing() -> str | None:
    """Why the browser harness cannot run here, or None."""
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


def write_notebook(path: pathlib.Path, cells: list[str]) -> None:
    items = [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}", "metadata": {},
              "outputs": [], "source": source} for i, source in enumerate(cells)]
    nb = {"cells": items, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                      "name": "python3"}}}
    path.write_text(json.dumps(nb), encoding="utf-8")


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


@contextlib.contextmanager
def lab_server(tmp: pathlib.Path, cells: list[str], name: str = "tree.ipynb",
               source: pathlib.Path | None = None, settings: dict | None = None) -> Iterator[LabServer]:
    """JupyterLab serving ``name`` in a temp dir: a notebook of ``cells``, or a copy of ``source`` (a
    tutorial, with its stored outputs); ``settings``: JupyterLab user settings,
    ``{"@jupyterlab/<extension>:<plugin>": {key: value}}``."""
    root = tmp / "notebooks"
    root.mkdir()
    if source is not None:
        shutil.copyfile(source, root / name)
    else:
        write_notebook(root / name, cells)
    env = dict(os.environ)
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"), ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces")):
        (tmp / sub).mkdir()
        env[var] = str(tmp / sub)
    env.pop("JUPYTER_TOKEN", None)
    # the kernel imports the toh_nb under test (this checkout), not whichever one the venv has installed
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH", "")]))
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    # no "receive official Jupyter news?" toast over the page
    news = tmp / "lab-settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8")
    for plugin, values in (settings or {}).items():
        extension, _, name_of_plugin = plugin.partition(":")
        path = tmp / "lab-settings" / extension / f"{name_of_plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--PasswordIdentityProvider.hashed_password=",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.extension_manager=readonly", "--allow-root"]
    log = tmp / "jupyter-lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    server = LabServer(proc, url, log)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {proc.returncode} before serving:\n{server.log_tail()}")
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"jupyter lab did not answer {url}/api/status within {SERVER_START_TIMEOUT} s:\n"
                                   f"{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        _stop(proc)


@contextlib.contextmanager
def lab_page(tmp: pathlib.Path, cells: list[str], name: str = "tree.ipynb",
             viewport: dict | None = None, source: pathlib.Path | None = None,
             settings: dict | None = None) -> Iterator[tuple]:
    """``(page, server)``: the notebook open in JupyterLab in headless Chromium, its kernel idle
    (``source``: open a copy of that notebook instead of one made of ``cells``; ``settings``: JupyterLab
    user settings, see :func:`lab_server`)."""
    from playwright.sync_api import expect, sync_playwright

    count = len(json.loads(source.read_text(encoding="utf-8"))["cells"]) if source is not None else len(cells)
    with lab_server(tmp, cells, name, source, settings) as server, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport=viewport or {"width": 1400, "height": 1000})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            page.add_init_script(RECORD_ERRORS_JS)
            page.goto(f"{server.url}/lab/workspaces/t-{uuid.uuid4().hex[:8]}/tree/{name}?reset")
            page.wait_for_function(KERNEL_IDLE_JS, arg=count, polling=200)
            news = page.locator("button:text-is('No'):visible")  # in case the settings did not apply
            if news.count():
                news.first.click()
            yield page, server
        finally:
            context.close()


@contextlib.contextmanager
def reported(page, server: "LabServer", shot: pathlib.Path) -> Iterator[None]:
    """Run a browser check: it also fails on any uncaught JavaScript error of the page, and a failure
    keeps a screenshot and the tail of JupyterLab's log in its message."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        yield
        errors = page.evaluate("() => window.__pageErrors")
        assert errors == [], f"uncaught JavaScript errors in the page: {errors}"
    except (AssertionError, PlaywrightError) as error:
        try:
            page.screenshot(path=str(shot), full_page=True)
        except PlaywrightError:
            pass
        raise AssertionError(f"{error}\nscreenshot: {shot}\nserver log ({server.log}):\n"
                             f"{server.log_tail()}") from error


def run_all(page) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")


#: every code cell of the open notebook ran in this session (its prompt numbers count from 1 again) and
#: the kernel is idle
RAN_ALL_JS = """() => {
    const w = window.jupyterapp.shell.currentWidget;
    const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
    const code = w.content.widgets.filter((cell) => cell.model.type === 'code');
    const counts = code.map((cell) => cell.model.executionCount);
    return !!kernel && kernel.status === 'idle' && counts.every((n, i) => n === i + 1);
}"""


def run_all_fresh(page, timeout_ms: int = 120_000) -> None:
    """Clear every output (and prompt number) of the open notebook, Run All, and wait until every code
    cell ran: what a reader who opens a stored tutorial and presses Run All ends up with."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.wait_for_function("""() => window.jupyterapp.shell.currentWidget.content.widgets
        .filter((cell) => cell.model.type === 'code').every((cell) => cell.model.executionCount === null)""",
                           polling=100)
    run_all(page)
    page.wait_for_function(RAN_ALL_JS, polling=300, timeout=timeout_ms)


def run_cell(page, index: int) -> None:
    """Select cell ``index`` and run it (``notebook:run-cell``), waiting until it finished (the command's
    promise settles when the cell's execution ends: :func:`start_cell` does not wait)."""
    page.evaluate("""(index) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = index;
        return window.jupyterapp.commands.execute('notebook:run-cell');
    }""", index)


def start_cell(page, index: int) -> None:
    """Select cell ``index`` and start running it without waiting for it to finish (the page stays
    usable while the kernel runs it)."""
    page.evaluate("""(index) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        nb.activeCellIndex = index;
        window.jupyterapp.commands.execute('notebook:run-cell');
    }""", index)
