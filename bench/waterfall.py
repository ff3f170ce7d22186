"""What the tree's Timeline (the waterfall) costs: bytes synced and milliseconds to build its data, and
bytes sent to the page when one agent settles.

Build (``--sizes``, default 50, 200, 1000): a tree of ``n`` settled continuable children, each with
``turns`` turns of one model call and one tool call; the Timeline open. One JSON line per size:
``waterfall_bytes`` (the settled agents' activations as JSON), ``first_ms`` (every shown agent's log
read), ``again_ms`` (nothing moved: no log read again), and the agents synced (at most
``toh_nb.notebook.waterfall.MAX_AGENTS``).

Settle (``--settle-sizes``, default 200, 1000): the same tree with the Timeline open in a page (the
widget's comm replaced by a recorder counting the bytes of every message the kernel would send: trait
updates and custom messages alike); one child takes one more turn. ``bytes_per_settle``: everything
sent from its ``send`` until the tree is quiet again. ``--before CHECKOUT`` also runs this part against
another checkout's ``toh_nb`` (e.g. ``/work/main``, in a subprocess) and prints both, so one run gives
before and after.

    python bench/waterfall.py [--sizes 50,200,1000] [--settle-sizes 200,1000] [--before ../main]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

#: which checkout's toh_nb is measured (``--before`` runs this script again with another one)
CHECKOUT = os.environ.get("TOH_NB_BENCH_CHECKOUT") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, CHECKOUT)

import toh_nb as tn  # noqa: E402
from toh_nb.notebook.widget import AgentTree  # noqa: E402
from _tree_sync import Recorder, quiet  # noqa: E402


def note(text: str) -> str:
    """A user tool each turn calls once."""
    return f"noted {text}"


def reply(request):
    if request.messages[-1].role == "user":
        return tn.ModelResponse(tool_calls=[tn.ToolCall("note", {"text": request.last_user_text})],
                                usage=tn.Usage(120, 12))
    return tn.ModelResponse(text="done", usage=tn.Usage(140, 3))


def settled_tree(hub, n: int, turns: int) -> list:
    kids = [hub.start(f"task {i}", label=f"kid {i}") for i in range(n)]
    for kid in kids:
        kid.wait(timeout=60)
    for turn in range(1, turns):
        for kid in kids:
            kid.send(f"again {turn}")
        for kid in kids:
            kid.wait(timeout=60)
    return kids


def measure(n: int, turns: int) -> dict:
    with tn.Hub(tn.FunctionModel(reply), ids="sequential", tools=[note]) as hub:
        settled_tree(hub, n, turns)
        tree = AgentTree(hub)
        try:
            tree.view = "timeline"
            started = time.perf_counter()
            hub.portal.call(tree._sync_waterfall)  # noqa: SLF001  (the step a refresh runs)
            first = time.perf_counter() - started
            started = time.perf_counter()
            hub.portal.call(tree._sync_waterfall)  # noqa: SLF001
            again = time.perf_counter() - started
            size = len(json.dumps(tree.waterfall))
            synced = len(tree.waterfall)
        finally:
            tree.close()
    return {"name": "waterfall", "n": n, "turns": turns, "agents_synced": synced, "waterfall_bytes": size,
            "first_ms": round(first * 1000, 1), "again_ms": round(again * 1000, 1)}


def measure_settle(n: int, turns: int) -> dict:
    with tn.Hub(tn.FunctionModel(reply), ids="sequential", tools=[note]) as hub:
        kids = settled_tree(hub, n, turns)
        tree = AgentTree(hub)
        recorder = Recorder()
        tree.comm.send = recorder
        try:
            tree.view = "timeline"
            quiet(tree, hub)
            tree.refresh()
            quiet(tree, hub)
            opened, _ = recorder.take()
            kids[0].send("one more")  # the first child: among the agents the Timeline syncs
            kids[0].wait(timeout=60)
            started = time.perf_counter()
            quiet(tree, hub)
            settle_bytes, settle_messages = recorder.take()
            waited = time.perf_counter() - started
        finally:
            tree.close()
    return {"name": "waterfall_settle", "checkout": CHECKOUT, "n": n, "turns": turns,
            "bytes_when_opened": opened, "bytes_per_settle": settle_bytes, "messages_per_settle": settle_messages,
            "seconds_until_quiet": round(waited, 1)}


def before(checkout: str, sizes: list[int], turns: int) -> list[dict]:
    """The settle figures of another checkout's toh_nb (this script, run again in a subprocess)."""
    env = dict(os.environ, TOH_NB_BENCH_CHECKOUT=os.path.abspath(checkout))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env["TOH_NB_BENCH_CHECKOUT"], env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--sizes", "", "--turns", str(turns),
                           "--settle-sizes", ",".join(map(str, sizes))],
                          env=env, capture_output=True, text=True, timeout=1800, check=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def sizes_of(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--settle-sizes", default="200,1000")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--before", default=None, help="another checkout: its settle figures are printed too")
    args = parser.parse_args()
    for n in sizes_of(args.sizes):
        print(json.dumps(measure(n, args.turns)), flush=True)
    settle = sizes_of(args.settle_sizes)
    old = before(args.before, settle, args.turns) if args.before and settle else []
    for line in old:
        print(json.dumps({**line, "version": "before"}), flush=True)
    for n in settle:
        figure = measure_settle(n, args.turns)
        print(json.dumps({**figure, "version": "after" if args.before else "this checkout"}), flush=True)


if __name__ == "__main__":
    main()
