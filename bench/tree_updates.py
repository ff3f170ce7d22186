"""What an open agent tree costs: bytes sent to the page per change, and how much it slows the engine.

No browser: the tree's comm is replaced by a recorder that counts the bytes of every message the
kernel would send to the page (trait updates and custom messages alike, as JSON), so the same script
measures any version of the widget (run it from another checkout to get its "before").

For each size N (the root, a continuable child ``kid`` first, then N−2 finished one-shot children):

- ``bytes_per_change``: ``kid.send(...)`` runs one turn of one child; the bytes sent from the send
  until the tree is quiet again;
- ``bytes_while_running``: ``kid`` runs one ``--run-s`` seconds turn in the big tree (nothing else changes);
- ``refresh_ms``: ``tree.refresh()`` of an unchanged tree (median of 5), and ``loop_ms_per_s``: the
  engine-thread time the tree took per second while the busy root below ran;
- ``slowdown``: a busy root (``hub.run`` in a loop for ``--busy-s`` seconds) runs at
  ``with_tree / without_tree`` of its speed with the tree open (1.0 = no slowdown);
  ``slowdown_noop_listener`` the same with a listener that does nothing (what any subscriber costs: the
  engine then builds its activity events).

    python bench/tree_updates.py [--sizes 1000,10000] [--busy-s 3] [--run-s 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:  # run from a checkout without installing: the package is next door
    sys.path.insert(0, REPO)

import toh_nb as tn  # noqa: E402
from _tree_sync import Recorder, quiet  # noqa: E402


def busy_root(hub, seconds: float) -> float:
    """Root turns per second for ``seconds``."""
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        hub.run("tick")
        done += 1
    return done / seconds


def measure(n: int, busy_s: float, run_s: float) -> dict:
    async def reply(request: tn.ModelRequest) -> str:
        if request.messages[-1].text == "sleep":
            await asyncio.sleep(run_s)
        return "ok"

    hub = tn.Hub(tn.FunctionModel(reply), ids="sequential")
    try:
        started = time.perf_counter()
        kid = hub.start("remember", label="kid")  # the first child: in view whatever the tree's row cap
        kid.wait(timeout=60)
        for i in range(n - 2):
            hub.spawn(f"task {i}", label=f"worker {i}")
        build_s = time.perf_counter() - started
        busy_root(hub, 0.3)  # warm up
        without = busy_root(hub, busy_s)

        # the part of the slowdown that is not the tree's: any listener makes the engine build its
        # activity events (a no-op listener, subscribed the way the tree subscribes)
        view = hub.async_hub.view
        unsubscribe = hub.portal.call(lambda: view.subscribe(lambda event: None))
        with_listener = busy_root(hub, busy_s)
        hub.portal.call(unsubscribe)

        tree = hub.tree()
        recorder = Recorder()
        tree.comm.send = recorder
        quiet(tree, hub)
        refresh = []
        for _ in range(5):
            t0 = time.perf_counter()
            tree.refresh()
            refresh.append((time.perf_counter() - t0) * 1000)
        quiet(tree, hub)
        recorder.take()

        kid.send("again")
        kid.wait(timeout=60)
        quiet(tree, hub)
        change_bytes, change_messages = recorder.take()

        kid.send("sleep")
        time.sleep(0.2)
        kid.wait(timeout=run_s + 60)
        quiet(tree, hub)
        running_bytes, running_messages = recorder.take()

        before_loop = getattr(tree, "busy_seconds", None)  # engine-thread time of its refreshes (if kept)
        with_tree = busy_root(hub, busy_s)
        after_loop = getattr(tree, "busy_seconds", None)
        quiet(tree, hub)
        recorder.take()
        tree.close()
        without_again = busy_root(hub, busy_s)
        base = (without + without_again) / 2
        return {"name": "tree_updates", "n": n, "build_s": round(build_s, 1),
                "bytes_per_change": change_bytes, "messages_per_change": change_messages,
                "bytes_while_running": running_bytes, "messages_while_running": running_messages,
                "run_s": run_s, "refresh_ms": round(statistics.median(refresh), 2),
                "loop_ms_per_s": (round((after_loop - before_loop) * 1000 / busy_s, 1)
                                  if before_loop is not None else None),
                "root_runs_per_s_without": round(base, 1), "root_runs_per_s_with": round(with_tree, 1),
                "slowdown": round(with_tree / base, 3),
                "root_runs_per_s_with_a_noop_listener": round(with_listener, 1),
                "slowdown_noop_listener": round(with_listener / base, 3)}
    finally:
        hub.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--n", type=int, default=None, help="one size (overrides --sizes)")
    parser.add_argument("--busy-s", type=float, default=3.0)
    parser.add_argument("--run-s", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [args.n] if args.n else [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        figure = measure(max(n, 3), args.busy_s, args.run_s)
        if args.json:
            print(json.dumps(figure), flush=True)
        else:
            print(f"tree_updates n={figure['n']}: {figure['bytes_per_change']:,} B per change "
                  f"({figure['messages_per_change']} messages), {figure['bytes_while_running']:,} B while one child "
                  f"ran {figure['run_s']:g} s, refresh {figure['refresh_ms']} ms, busy root at "
                  f"{figure['slowdown']:.2f}x its speed with the tree open "
                  f"({figure['root_runs_per_s_with']}/s vs {figure['root_runs_per_s_without']}/s; "
                  f"{figure['slowdown_noop_listener']:.2f}x with a no-op event listener)"
                  + (f", tree on the engine thread {figure['loop_ms_per_s']} ms/s" if figure['loop_ms_per_s']
                     is not None else ""), flush=True)


if __name__ == "__main__":
    main()
