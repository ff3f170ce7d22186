"""The documentation site's pages are executable too: every ```python block of every page under
``docs/`` runs as written (as the README's do: ``tests/markdown_code.py``), every ```bash block is
valid bash naming only options its commands have, and the pages keep the examples the guides promise.

Pages another engineer writes (``docs/guides/*.md``) are picked up as they appear: nothing here lists
them. The tutorials are notebooks, run by nbval (``notebooks/``), not here.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ..markdown_code import ROOT, SLOW_NEEDS, Block, blocks, check_needs_marker, env, run, run_as_written

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "tutorials" not in p.relative_to(DOCS).parts)
BLOCKS = [block for page in PAGES
          for block in blocks(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))]
PYTHON = [b for b in BLOCKS if b.language == "python"]
SHELL = [b for b in BLOCKS if b.language == "bash"]


def ident(block: Block) -> str:
    return f"{block.source.removeprefix('docs/')}:{block.name}"


def test_the_pages_hold_the_examples_the_guides_promise():
    by_page = {}
    for block in PYTHON:
        by_page.setdefault(block.source, []).append(block)
    assert {"docs/getting-started.md", "docs/concepts.md", "docs/guides/models.md", "docs/guides/acp.md",
            "docs/guides/ray.md", "docs/guides/persistence.md", "docs/guides/testing.md"} <= set(by_page)
    models = "".join(b.code for b in by_page["docs/guides/models.md"])
    assert "OpenAIChatModel" in models and "LocalModel" in models and "ReplayModel" in models
    served = [b.code for b in by_page["docs/guides/models.md"] if b.needs == ["server"]]
    for prefix in ("openai:", "llamacpp:", "vllm:", "ollama:"):  # a block per backend, run on the stand-in server
        assert any(re.search(rf'model=f?"{prefix}', code) for code in served), prefix
    assert any(b.needs == ["acp"] for b in by_page["docs/guides/acp.md"])
    assert any(b.needs == ["ray"] for b in by_page["docs/guides/ray.md"])
    assert any("token_budget=" in b.code for b in by_page["docs/concepts.md"])
    mcp = [b for b in by_page["docs/guides/mcp.md"] if b.needs == ["mcp"]]
    assert any("tn.MCPServer(command=[sys.executable" in b.code for b in mcp)  # a Python server over stdio
    assert any("tn.MCPServer(url=" in b.code for b in mcp)  # one over streamable HTTP, started by the block
    assert any("tool_filter=" in b.code for b in mcp)
    traces = [b for b in by_page["docs/guides/traces.md"] if b.needs == ["otel"]]
    assert any("InMemorySpanExporter" in b.code and "tracing=" in b.code for b in traces)


def test_a_block_needing_a_missing_extra_is_skipped_with_the_reason(monkeypatch, tmp_path):
    """``# needs: mcp`` / ``# needs: otel`` skip where the SDK is missing (a dotted module whose parent
    package is missing too) and name the extra to install; they run where it is installed."""
    import importlib.util

    from .. import markdown_code

    def absent(name, *args):
        if name.split(".")[0] in ("mcp", "opentelemetry"):
            if "." in name:
                raise ModuleNotFoundError(f"No module named {name.split('.')[0]!r}")
            return None
        return real(name, *args)

    real = importlib.util.find_spec
    here = [name for name, module in (("mcp", "mcp"), ("otel", "opentelemetry.sdk")) if not markdown_code.installed(module)]
    assert markdown_code.missing_extras(["mcp", "otel", "server"]) == here  # [] where .ci/run installed them
    monkeypatch.setattr(importlib.util, "find_spec", absent)
    assert markdown_code.missing_extras(["mcp", "otel", "server"]) == ["mcp", "otel"]
    block = Block("python", 3, "Traces", "# needs: otel\nraise SystemExit(1)\n", "docs/guides/traces.md")
    with pytest.raises(pytest.skip.Exception) as skipped:
        run_as_written(block, tmp_path)
    assert str(skipped.value) == ("docs/guides/traces.md line3-traces needs the otel extra: pip install -e "
                                  "'.[otel]' (.ci/run installs every extra)")


@pytest.mark.parametrize("block", PYTHON, ids=[ident(b) for b in PYTHON])
def test_every_needs_marker_names_something_this_test_provides(block):
    check_needs_marker(block)


@pytest.mark.slow
@pytest.mark.timeout(max(SLOW_NEEDS.values()) + 60)  # bounded by the block's own subprocess timeout
@pytest.mark.parametrize("block", PYTHON, ids=[ident(b) for b in PYTHON])
def test_python_block_runs_as_written(block, tmp_path):
    run_as_written(block, tmp_path)


def test_the_cost_example_prices_the_model_it_runs(tmp_path):
    """The price table's key is the model the block runs (``"demo"``), so its cost columns fill."""
    block = next(b for b in PYTHON if "prices=" in b.code)
    done = run(block, tmp_path, env())
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["id", "label", "input_tokens", "output_tokens", "cost", "subtree_cost"]
    assert rows and all(re.fullmatch(r"\d+\.\d{6}", row.split()[-1]) for row in rows), done.stdout


@pytest.mark.parametrize("block", SHELL, ids=[ident(b) for b in SHELL])
def test_every_bash_block_is_valid_bash_and_names_only_real_options(block):
    """Shell blocks are not run (an install, a server that waits on stdin, a benchmark of minutes) but
    stay correct: valid bash, and every ``--option`` given to ``python -m toh_nb <command>`` or to a
    ``bench/`` script is one that command has."""
    done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, (ident(block), done.stderr)
    commands = [([sys.executable, "-m", "toh_nb", command], rest)
                for command, rest in re.findall(r"python -m toh_nb (\w+)(.*)", block.code)]
    commands += [([sys.executable, str(ROOT / script)], rest)
                 for script, rest in re.findall(r"python (bench/\w+\.py)(.*)", block.code)]
    for argv, rest in commands:
        helped = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT,
                                env=env(), check=False)
        assert helped.returncode == 0, helped.stderr
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest):
            assert option in helped.stdout, f"{ident(block)}: {' '.join(argv[1:])} has no {option}"


def test_there_are_shell_blocks_to_check():
    assert len(SHELL) >= 3


def test_a_collector_block_whose_spans_never_arrive_fails(tmp_path):
    """``# needs: collector`` is checked, not trusted: a block that exports nothing to the stand-in
    collector fails, as one exporting to a Phoenix that is not running would."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    block = Block("python", 7, "Phoenix", "# needs: otel, collector\nprint('no exporter here')\n",
                  "docs/guides/traces.md")
    with pytest.raises(AssertionError, match="docs/guides/traces.md line7-phoenix: no span reached the collector"):
        run_as_written(block, tmp_path)
