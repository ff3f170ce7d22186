"""The package is ready to release: pyproject.toml's metadata (an SPDX license expression with its
file, classifiers for the Pythons CI runs, project URLs, a changelog entry for the version) and package
data that covers every file the package reads at run time. ``.ci/run`` builds the sdist and the wheel
and runs the demo from the wheel in a bare virtualenv; this checks, without building, what that relies on.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib

import toh_nb

from .markdown_code import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def test_the_license_is_an_spdx_expression_with_its_file():
    """PEP 639: ``license = "MIT"`` (the table form is deprecated: setuptools warned on every build)."""
    assert PROJECT["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # an expression replaces them
    assert PROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    requires = PYPROJECT["build-system"]["requires"]
    assert requires == ["setuptools>=77"], requires  # the first setuptools that reads license expressions


def test_the_metadata_says_where_the_project_lives():
    assert set(PROJECT["urls"]) == {"Homepage", "Documentation", "Source", "Issues", "Changelog"}
    assert all(url.startswith("https://") for url in PROJECT["urls"].values())
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"repo_url: {PROJECT['urls']['Source']}\n" in mkdocs


def test_the_changelog_has_the_version_being_released():
    assert PROJECT["version"] == toh_nb.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(toh_nb.__version__)}\] — \d{{4}}-\d{{2}}-\d{{2}}$", changelog, flags=re.M)
    assert "## [Unreleased]" in changelog


def test_package_data_covers_every_file_the_package_ships_besides_its_modules():
    """A file under ``toh_nb/`` that is not a module (the tree's ``tree.js``/``tree.css``) is in the wheel
    only if a package-data pattern names it: a new one without a pattern would break the installed tree."""
    tracked = subprocess.run(["git", "ls-files", "toh_nb"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    data = [path for path in tracked if not path.endswith(".py")]
    assert "toh_nb/notebook/tree.js" in data and "toh_nb/notebook/tree.css" in data
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]
    for path in data:
        package, name = path.rsplit("/", 1)
        globs = patterns.get(package.replace("/", "."), [])
        assert any(fnmatch.fnmatch(name, glob) for glob in globs), f"{path} is not in any package-data pattern"


def test_the_docs_extra_installs_what_mkdocs_yml_uses():
    docs = " ".join(PROJECT["optional-dependencies"]["docs"])
    for package in ("mkdocs", "mkdocs-material", "mkdocstrings-python", "mkdocs-jupyter"):
        assert re.search(rf"(^| ){re.escape(package)}[<>=]", docs), package
    mkdocs = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "name: material" in mkdocs and "- mkdocstrings:" in mkdocs and "- mkdocs-jupyter:" in mkdocs


def test_ci_builds_the_release_and_runs_the_demo_from_the_wheel():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m build --outdir .ci-dist ." in ci
    assert ".ci-wheel-venv/bin/python -m pip install --quiet .ci-dist/toh_nb-*-py3-none-any.whl" in ci
    assert '"$wheel_python" -m toh_nb demo' in ci
    assert "mkdocs build --strict" in ci
