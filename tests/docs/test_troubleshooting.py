"""Errors link to their entry of the Troubleshooting page: each link an error's docstring gives names
a heading the page has (as mkdocs' table of contents makes its anchor), so a reworded heading cannot
leave an error pointing nowhere."""

from __future__ import annotations

import re

import pytest

import toh_nb as tn

from ..markdown_code import ROOT

PAGE = ROOT / "docs" / "troubleshooting.md"
SITE = "https://toh-nb.github.io/toh_nb/troubleshooting/"
LINKED = ["UsageError", "ClosedError", "SubagentError", "SubagentDepthError", "JobError", "StoreError", "ModelError",
          "RunError"]


def anchors() -> set[str]:
    markdown = pytest.importorskip("markdown", reason="the docs extra (mkdocs' markdown) is not installed")
    page = markdown.Markdown(extensions=["toc"])
    page.convert(PAGE.read_text(encoding="utf-8"))

    def walk(tokens):
        for token in tokens:
            yield token["id"]
            yield from walk(token["children"])

    return set(walk(page.toc_tokens))


@pytest.mark.parametrize("name", LINKED)
def test_an_error_links_to_an_entry_the_page_has(name):
    links = re.findall(rf"Troubleshooting: ({re.escape(SITE)}\S*)", getattr(tn, name).__doc__)
    assert len(links) == 1, name
    anchor = links[0].removeprefix(SITE).removeprefix("#")
    assert anchor == "" or anchor in anchors(), (name, anchor)


def test_the_page_has_the_entries_the_errors_point_to():
    assert {"models", "hubs-and-stores", "delegation", "this-hub-is-closed-create-a-new-hub-to-continue",
            "subagent-depth-4-exceeds-maxdepth-3", "unknown-job-subagent-9"} <= anchors()
