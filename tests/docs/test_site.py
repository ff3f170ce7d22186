"""The documentation site builds strictly and shows what it promises, checked in a real browser.

The site is built once for the module with ``mkdocs build --strict`` (the build ``.ci/run`` makes:
any warning, broken link or anchor, or a public name mkdocstrings cannot document fails it), into a
temporary directory. Then:

- the API reference has an entry for every name of ``toh_nb.__all__``, where it is defined now;
- in headless Chromium (the system one, as for the notebook browser tests), a tutorial page renders
  its stored outputs — the tree's static HTML snapshot, the printed tables — and the getting-started
  page shows the tree's picture.

Skipped, with the reason, without the ``docs`` extra (mkdocs and its plug-ins) or without Chromium and
Playwright (``dev``).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest

import toh_nb

from ..markdown_code import ROOT
from ..notebook import lab
from ..test_notebooks_setup import EXPECTED as TUTORIALS

pytestmark = pytest.mark.slow
DOCS_MODULES = {"mkdocs": "mkdocs", "material": "mkdocs-material", "mkdocstrings_handlers.python": "mkdocstrings-python",
                "mkdocs_jupyter": "mkdocs-jupyter"}
BUILD_TIMEOUT = 300


def _missing_docs_tools() -> str | None:
    for module, package in DOCS_MODULES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"the docs extra is not installed ({package}): pip install -e '.[docs]'"
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    missing = _missing_docs_tools()
    if missing:
        pytest.skip(missing)
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return out


def test_the_api_reference_documents_every_public_name(site):
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = []
    for name in toh_nb.__all__:
        obj = getattr(toh_nb, name)
        if f'id="{obj.__module__}.{obj.__qualname__}"' not in page:
            missing.append(name)
    assert missing == []


def test_every_tutorial_is_a_page_of_the_site(site):
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks == [name.removesuffix(".ipynb") for name in TUTORIALS]
    assert [p for p in notebooks if not (site / "tutorials" / p / "index.html").is_file()] == []


def _browser():
    reason = lab.missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import expect, sync_playwright

    return expect, sync_playwright


@contextlib.contextmanager
def served(directory: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (a free port), as a reader's browser gets it (the search
    index is fetched, which ``file://`` refuses); the server is stopped afterwards."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_tutorial_page_renders_its_stored_outputs_in_chromium(site, tmp_path):
    expect, sync_playwright = _browser()
    with served(site) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(lab.CHROMIUM), headless=True, args=lab.CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(f"{url}/tutorials/01_quickstart/")
            tree = page.locator(".toh-tree-static").first
            expect(tree).to_be_visible()
            expect(tree).to_contain_text("agent tree")
            expect(tree.locator("code[title='root']")).to_be_visible()
            expect(tree.locator("td", has_text="root (you)")).to_be_visible()
            expect(tree.locator("code[title='agent-1']")).to_be_visible()
            outputs = page.locator(".jp-OutputArea-output")
            assert outputs.count() >= 8, outputs.count()
            expect(page.locator(".jp-OutputArea-output", has_text="subtree_cost").first).to_be_visible()
            tree.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "tutorial.png"))
            # the getting-started page shows the tree's picture (loaded, not a broken image)
            page.goto(f"{url}/getting-started/")
            image = page.locator("img[alt='The live tree in JupyterLab']")
            expect(image).to_be_visible()
            assert page.evaluate("(img) => img.naturalWidth", image.element_handle()) > 600
            page.screenshot(path=str(tmp_path / "getting-started.png"))
            # a script from a CDN (Mermaid, for the diagram of ``hub.graph()``) cannot load offline; the site's own must
            assert [e for e in errors if "https://" not in e] == [], errors
        finally:
            browser.close()
