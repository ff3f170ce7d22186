"""``python -m toh_nb demo``: the main offline demo, end to end in a subprocess."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from toh_nb.__main__ import main


def _sections(stdout: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("== ") and line.endswith(" =="):
            current = line[3:-3]
            sections[current] = []
        elif current is not None and line:
            sections[current].append(line)
    return sections


@pytest.mark.slow
def test_demo_runs_offline_and_prints_every_section():
    done = subprocess.run([sys.executable, "-m", "toh_nb", "demo"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    sections = _sections(done.stdout)
    assert list(sections) == ["Final answer", "Continuable child agent-6 (editor)", "Agent tree",
                              "list_agents descendants (what the root's model sees: continuable children only)",
                              "Agents", "Jobs"]
    answer = sections["Final answer"]
    assert answer[0] == 'Summary for "Plan a small vegetable garden for a sunny balcony":'
    assert [line.split(":")[0] for line in answer[1:5]] == ["- research", "- analyse", "- draft",
                                                             "- review (job subagent-1)"]
    assert answer[-1] == "4 of 4 delegated tasks answered."
    editor = sections["Continuable child agent-6 (editor)"]
    assert editor[0].startswith('first turn: Edited "plan a small vegetable garden for a sunny balcony":')
    assert editor[1] == ('follow-up:  Revised "plan a small vegetable garden for a sunny balcony" as asked '
                         '("Make it two sentences shorter").')
    tree = sections["Agent tree"]
    assert tree[0].startswith("agent tree: 7 agents (0 running) \u00b7 1 job (0 active) \u00b7 ")
    assert [line.split(" \u00b7 ")[:3] for line in tree[1:]] == [
        ["root (you)", "idle", "turns 1"],
        ["\u251c\u2500\u2500 research", "agent-1", "one-shot"],
        ["\u2502   \u2514\u2500\u2500 sources", "agent-4", "one-shot"],
        ["\u251c\u2500\u2500 analyse", "agent-2", "one-shot"],
        ["\u251c\u2500\u2500 draft", "agent-3", "one-shot"],
        ["\u251c\u2500\u2500 job review", "subagent-1", "completed"],
        ["\u2502   \u2514\u2500\u2500 review", "agent-5", "one-shot"],
        ["\u2514\u2500\u2500 editor", "agent-6", "continuable"]]
    assert sections["list_agents descendants (what the root's model sees: continuable children only)"] == [
        "agent-6 [ready] parent=root depth=1 \u2014 editor"]
    agents = [line.split() for line in sections["Agents"]]
    assert agents[0] == ["id", "parent", "depth", "label", "mode", "status", "turns", "stop_reason"]
    assert [row[:4] for row in agents[1:]] == [  # empty cells, not None: the root has no parent or label
        ["root", "0", "root", "idle"], ["agent-1", "root", "1", "research"], ["agent-4", "agent-1", "2", "sources"],
        ["agent-2", "root", "1", "analyse"], ["agent-3", "root", "1", "draft"], ["agent-5", "root", "1", "review"],
        ["agent-6", "root", "1", "editor"]]
    jobs = [line.split() for line in sections["Jobs"]]
    assert jobs[0] == ["id", "label", "status", "detail", "owner", "started", "finished", "elapsed_s"]
    assert jobs[1][:4] == ["subagent-1", "review", "completed", "root"]
    started, finished, seconds, unit = jobs[1][4:]  # clock times and a duration, not raw timestamps
    assert [re.fullmatch(r"\d\d:\d\d:\d\d", clock) is not None for clock in (started, finished)] == [True, True]
    assert re.fullmatch(r"\d+\.\d", seconds) is not None and unit == "s"


@pytest.mark.slow
def test_demo_output_is_reproducible_apart_from_the_clock():
    def run():
        out = subprocess.run([sys.executable, "-m", "toh_nb", "demo", "--latency", "0"], capture_output=True,
                             text=True, timeout=60).stdout
        return out.split("== Jobs ==")[0]

    assert run() == run()


def test_main_without_a_command_prints_usage_and_fails(capsys):
    assert main([]) == 2
    assert "usage: toh-nb" in capsys.readouterr().err


def test_main_rejects_bad_options(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--latency", "-1"])
    assert exit_info.value.code == 2
    assert "--latency must be >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fly"])


def test_main_demo_in_process_with_a_custom_topic(capsys):
    assert main(["demo", "--topic", "Choose a laptop", "--latency", "0"]) == 0
    out = capsys.readouterr().out
    assert 'Summary for "Choose a laptop":' in out
    assert "agent-6 [ready] parent=root depth=1 \u2014 editor" in out


@pytest.mark.slow
def test_acp_without_the_extra_prints_the_install_line_and_exits_2(tmp_path):
    """The ``acp`` SDK hidden (as if not installed): one line naming the extra, no traceback, status 2."""
    hide = "import sys; sys.modules['acp'] = None; import runpy; runpy.run_module('toh_nb', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", hide, "acp", "--store", str(tmp_path / "store")],
                          input="", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("toh-nb acp: error: ACP needs the optional extra: pip install 'toh-nb[acp]' "
                           "(PyPI agent-client-protocol; not the unrelated PyPI package 'acp')\n")
    assert not (tmp_path / "store").exists()


def served(model: str, base_url: str | None = None, store: str | None = None):
    import argparse

    from toh_nb.serve.command import prepare

    args = argparse.Namespace(model=model, base_url=base_url, latency=0.5, verbose=False, store=store)
    return prepare("mcp", args, lambda: None)


def test_served_hubs_read_model_names_as_the_hub_does_and_a_bare_name_as_before(capsys, tmp_path, monkeypatch):
    """``--model`` goes through the one parser of model names; a bare name stays an OpenAI-compatible
    model (``--base-url`` its URL), and a refused name is one line and exit status 2, before ``--store``."""
    import toh_nb as tn

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model, store = served("ollama:llama3.1:8b")
    assert (model.model, model.base_url, model.profile.name, store) == (
        "llama3.1:8b", "http://localhost:11434/v1", "ollama", None)
    model, _ = served("ollama:llama3.1", base_url="http://box:11434/v1")
    assert model.base_url == "http://box:11434/v1"
    model, _ = served("gpt-4o-mini", base_url="http://h:1/v1")
    assert (model.model, model.base_url, model.profile.name) == ("gpt-4o-mini", "http://h:1/v1", "openai")
    demo, _ = served("demo")
    assert isinstance(demo, tn.DemoModel) and demo.latency == 0.5
    capsys.readouterr()
    assert served("vllm:qwen", store=str(tmp_path / "runs")) == 2
    assert capsys.readouterr().err == ('toh-nb mcp: error: --model "vllm:qwen" needs its server\'s URL: '
                                       '"vllm:qwen@http://localhost:8000/v1" (the address your server listens on)\n')
    assert not (tmp_path / "runs").exists()
    assert served("local", base_url="http://h:1/v1") == 2
    assert capsys.readouterr().err == ('toh-nb mcp: error: --model "local" runs no server, so a URL does not apply; '
                                       'for a server\'s model named "local", write "openai:local@URL"\n')
