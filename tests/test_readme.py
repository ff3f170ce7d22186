"""README.md is executable documentation: every ```python block runs as written, and its claims about
the project (commands, supported Pythons, what ``.ci/run`` installs, where the docs are) match the
project's own files.

How a block runs (a fresh interpreter in an empty directory; ``# needs: …`` markers for extras and a
model server) is ``tests/markdown_code.py``, shared with the docs pages' test
(``tests/docs/test_docs_code.py``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

import pytest

from .markdown_code import ROOT, blocks, check_needs_marker, run_as_written

README = ROOT / "README.md"
#: where the README's links point: the Source URL of pyproject.toml, its default branch, the raw files
SOURCE = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Source"]
BRANCH = "main"
RAW = SOURCE.replace("https://github.com/", "https://raw.githubusercontent.com/") + f"/{BRANCH}"
README_BLOCKS = blocks(README.read_text(encoding="utf-8"))
PYTHON_BLOCKS = [b for b in README_BLOCKS if b.language == "python"]


def test_the_readme_has_its_example():
    """A landing page: one short example under "What it is", and a picture of the tree."""
    assert [b.section for b in PYTHON_BLOCKS] == ["What it is"]
    text = README.read_text(encoding="utf-8")
    assert f"![The live tree of agents and jobs in JupyterLab]({RAW}/docs/images/tree.png)" in text
    assert (ROOT / "docs" / "images" / "tree.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.name for b in PYTHON_BLOCKS])
def test_every_needs_marker_names_something_this_test_provides(block):
    check_needs_marker(block)


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.name for b in PYTHON_BLOCKS])
def test_python_block_runs_as_written(block, tmp_path):
    run_as_written(block, tmp_path)


# -- claims about the project ------------------------------------------------------------------------


def readme_commands() -> list[str]:
    """The README's first ```bash block: the install-and-demo and test commands ``.ci/run`` runs verbatim."""
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "readme_commands.py")], capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.splitlines()


def test_the_first_bash_block_is_the_two_commands_ci_runs_verbatim():
    first = next(b for b in README_BLOCKS if b.language == "bash")
    assert first.line == 3 and first.section == ""
    assert readme_commands() == first.code.splitlines() == [
        "pip install -e '.[dev]' && python -m toh_nb demo", "python -m pytest"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_commands.py" in ci and "bash -e" in ci


def test_the_supported_pythons_stated_are_the_ones_pyproject_allows():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11"
    assert "with Python 3.11 or newer\n(`requires-python = \">=3.11\"`" in README.read_text(encoding="utf-8")
    classified = sorted(c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
                        if c.startswith("Programming Language :: Python :: 3."))
    assert classified == ["3.11", "3.12", "3.13"]
    assert "also on 3.12 and\n3.13" in README.read_text(encoding="utf-8")
    assert (sys.version_info.major, sys.version_info.minor) >= (3, 11)


def test_the_suites_that_skip_say_why():
    """The README says suites needing an extra "skip and say why": pytest prints each skip's reason."""
    assert "skip and say why" in README.read_text(encoding="utf-8")
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert "-rs" in options["addopts"].split()


def test_what_the_readme_says_ci_installs_is_what_ci_installs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installs = set(re.findall(r"pip install --quiet -e '(\.\[[a-z,]+\])'", ci))
    assert installs == {".[dev,local,acp,ray,otel,mcp,docs]"}
    readme = README.read_text(encoding="utf-8")
    claims = re.findall(r"`\.ci/run` .*?installs `?(?:pip install -e ')?(\.\[[a-z,]+\])", readme.replace("\n", " "))
    assert claims and set(claims) <= installs, claims


def test_no_file_points_outside_the_repository_for_its_contract():
    """The behaviour contract lives in ``docs/contract.md``; nothing refers to a sibling checkout."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    needle = "../" + "shared"
    offenders = [name for name in tracked if (ROOT / name).is_file() and name.endswith((".md", ".py", ".ipynb", ".toml"))
                 and needle in (ROOT / name).read_text(encoding="utf-8", errors="replace")]
    assert offenders == []
    assert "docs/contract.md" in README.read_text(encoding="utf-8") and (ROOT / "docs" / "contract.md").is_file()


def repository_file(link: str) -> str | None:
    """The repository path an absolute README link names (``SOURCE/blob/main/PATH``, ``SOURCE/tree/main/DIR``,
    ``RAW/PATH``, an ``#anchor`` dropped), or None for a link that is not into this repository."""
    link = link.split("#", 1)[0]
    for prefix in (f"{SOURCE}/blob/{BRANCH}/", f"{SOURCE}/tree/{BRANCH}/", f"{RAW}/"):
        if link.startswith(prefix):
            return link[len(prefix):].rstrip("/")
    return None


def test_every_link_of_the_readme_is_absolute_and_names_a_file_of_the_repository():
    """The README is also the package's long description (PyPI, a wheel's metadata), where a relative
    link breaks: each link into the repository is absolute under the Source URL of pyproject.toml (the
    image under its raw URL) and names a file or directory the repository has."""
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    assert len(links) >= 10
    relative = [link for link in links if not link.startswith(("https://", "http://"))]
    assert relative == []
    outside = [link for link in links if repository_file(link) is None]
    assert outside == []
    missing = [link for link in links if not (ROOT / repository_file(link)).exists()]
    assert missing == []


def test_the_link_mapping_fails_on_what_does_not_exist():
    assert repository_file(f"{SOURCE}/blob/{BRANCH}/docs/concepts.md#jobs") == "docs/concepts.md"
    assert repository_file(f"{SOURCE}/tree/{BRANCH}/docs/") == "docs"
    assert repository_file(f"{RAW}/docs/images/tree.png") == "docs/images/tree.png"
    assert repository_file("https://example.com/docs/concepts.md") is None
    assert not (ROOT / repository_file(f"{SOURCE}/blob/{BRANCH}/docs/no-such-page.md")).exists()
