"""(Re)build the tutorial notebooks' stored outputs.

    python notebooks/build.py                 # re-record 06's exchanges, then execute every notebook
    python notebooks/build.py 03 05           # only the notebooks whose names start with 03 / 05
    python notebooks/build.py --no-record     # keep the existing recording

Each notebook is executed top to bottom in a fresh ``python3`` kernel (working directory: this folder)
with ``nbclient`` and written back with its outputs, which ``pytest --nbval`` then compares on every
test run. ``store_widget_state=False`` and ``record_timing=False`` keep random widget state and
timestamps out of the files, so a rebuild of unchanged notebooks changes nothing but widget model ids
(which nbval does not compare). Each output is stored as its cell displayed it: a later update of a
display (the live tree keeps its snapshot current while agents run) is not applied, because nbval, which
compares the stored outputs, sees each cell's outputs as they were when the cell ran and never a later
update (``CellTimeClient``).

The recording ``recordings/06_real_llm.jsonl`` is made by a :class:`toh_nb.RecordingModel` around an
:class:`toh_nb.OpenAIChatModel` talking to a small OpenAI-compatible HTTP server on 127.0.0.1
(``tests/models/chat_server.py``) whose replies are scripted below: the exchanges go through the real
``openai`` client and wire format, with no network and no key. The prompts here must match the cells of
``06_real_llm.ipynb``; re-run this script after changing either (or after changing tool descriptions or
system prompts, which are part of every recorded request).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDING = HERE / "recordings" / "06_real_llm.jsonl"
KERNEL = "python3"
CELL_TIMEOUT = 300

# -- the recording for 06_real_llm.ipynb --------------------------------------------------------------

ROOT_PROMPT = "Plan a small city garden; delegate the research."
RESEARCH_PROMPT = "List five plants that grow well in a small city garden."
BALCONY_PROMPT = "Keep track of what grows well on a balcony."
BALCONY_FOLLOW_UP = "Which of those need the least water?"


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def stand_in_llm(body: dict):
    """The scripted 'LLM' behind the local server: replies chosen from the last message."""
    from tests.models.chat_server import text, tool_calls

    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    said = _content(last)
    if last.get("role") == "tool":
        return text("Plan: start with containers by the sunniest wall. The research found: " + said.strip(),
                    usage=(412, 31))
    if "delegate the research" in said:
        return tool_calls([("call_research_1", "subagent", {"description": "research", "prompt": RESEARCH_PROMPT})],
                          usage=(388, 27))
    if RESEARCH_PROMPT in said:
        return text("Tomatoes, basil, lettuce, chard and nasturtiums all grow well in small city gardens.",
                    usage=(301, 22))
    if BALCONY_PROMPT in said:
        return text("Noted: herbs, cherry tomatoes and strawberries do well on a balcony.", usage=(296, 18))
    if BALCONY_FOLLOW_UP in said:
        return text("Of those, rosemary and thyme need the least water.", usage=(330, 12))
    return text("I am a stand-in model and have no answer for that.", usage=(280, 11))


def record_real_llm() -> None:
    sys.path.insert(0, str(ROOT))
    import toh_nb as tn
    from tests.models.chat_server import ChatServer

    with ChatServer() as server:
        server.responder = stand_in_llm
        live = tn.OpenAIChatModel("stand-in", base_url=server.url, api_key="sk-local-stand-in")
        recorder = tn.RecordingModel(live, RECORDING, overwrite=True)
        with tn.Hub(model=recorder, ids="sequential") as hub:
            res = hub.run(ROOT_PROMPT)
            assert res.stop_reason == "completed", res
            child = hub.start(BALCONY_PROMPT, label="balcony")
            child.wait(timeout=60)
            child.send(BALCONY_FOLLOW_UP)
            child.wait(timeout=60)
    lines = RECORDING.read_text(encoding="utf-8").splitlines()
    print(f"recorded {len(lines)} exchanges to {RECORDING.relative_to(ROOT)}")


# -- executing the notebooks ------------------------------------------------------------------------


def ensure_kernelspec() -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL not in KernelSpecManager().find_kernel_specs():
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--sys-prefix"], check=True)


def cell_time_client():
    """``nbclient.NotebookClient`` that keeps each display as its cell showed it (see the module docstring)."""
    from nbclient import NotebookClient

    class CellTimeClient(NotebookClient):
        def _update_display_id(self, display_id, msg):
            if msg["header"]["msg_type"] == "update_display_data":
                return  # nbval never applies these: the stored output must be what the cell displayed
            super()._update_display_id(display_id, msg)

    return CellTimeClient


def execute(path: Path) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = cell_time_client()(nb, timeout=CELL_TIMEOUT, kernel_name=KERNEL, store_widget_state=False,
                            record_timing=False, resources={"metadata": {"path": str(HERE)}})
    env = dict(os.environ)
    env.pop("OPENAI_API_KEY", None)  # never reach a paid endpoint while building
    env.pop("OPENAI_BASE_URL", None)
    client.execute(env=env)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print(f"executed {path.name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    parser.add_argument("--no-record", action="store_true", help="keep the existing 06 recording")
    args = parser.parse_args(argv)
    notebooks = sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    if args.names:
        notebooks = [p for p in notebooks if any(p.name.startswith(n) for n in args.names)]
    if not args.no_record and any(p.name.startswith("06") for p in notebooks):
        record_real_llm()
    ensure_kernelspec()
    for path in notebooks:
        execute(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
