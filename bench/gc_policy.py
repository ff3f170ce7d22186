"""What the opt-in GC policy buys (``tn.Hub(gc=True)``; ``toh_nb.core.gc_policy``).

A hub leaves the process's garbage collector alone unless asked. The benchmarks opt in (``_common.py``
calls ``gc_policy.set_enabled(True)`` unless ``--no-gc-policy``); this script runs the same figure twice
in fresh interpreters, with and without the policy (alternated, ``--repeat`` times, the fastest of
each kept), and prints both side by side: the rate, the time
spent in collections and how many there were. The policy's gain grows with the number of live objects
(every full collection walks all of them), so the sizes default to 10,000 and 30,000 children.

    python bench/gc_policy.py                      # continuable and sequential, 10k and 30k
    python bench/gc_policy.py --figures continuable --n 30000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ("continuable", "sequential")


def run(figure: str, n: int, policy: bool) -> dict:
    command = [sys.executable, os.path.join(HERE, f"{figure}.py"), "--n", str(n), "--json", "--no-warmup"]
    if not policy:
        command.append("--no-gc-policy")
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=os.path.dirname(HERE))
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return lines[-1]


def gc_text(fig: dict) -> str:
    """``1.23 s in 45 collections`` (all generations) from a figure's ``gc_seconds``/``gc_collections``."""
    seconds, collections = fig.get("gc_seconds") or [0.0], fig.get("gc_collections") or [0]
    return f"{sum(seconds):.2f} s in {sum(collections)} collections, {seconds[-1]:.2f} s full"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", default=",".join(FIGURES), help="comma separated (default: %(default)s)")
    parser.add_argument("--n", default="10000,30000", help="sizes, comma separated (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each side, alternated (on, off, on, off …); the fastest of each is kept, "
                             "so a busy moment of a shared machine does not pick the winner (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="one JSON line per comparison")
    args = parser.parse_args()
    for figure in args.figures.split(","):
        for n in (int(part) for part in args.n.split(",")):
            ons, offs = [], []
            for _ in range(max(args.repeat, 1)):
                ons.append(run(figure, n, True))
                offs.append(run(figure, n, False))
            on = max(ons, key=lambda fig: fig["rate_per_s"])
            off = max(offs, key=lambda fig: fig["rate_per_s"])
            row = {"name": f"gc_policy_{figure}", "n": n,
                   "rate_on": on["rate_per_s"], "rate_off": off["rate_per_s"],
                   "speedup": round(on["rate_per_s"] / off["rate_per_s"], 2),
                   "gc_seconds_on": on.get("gc_seconds"), "gc_seconds_off": off.get("gc_seconds"),
                   "gc_collections_on": on.get("gc_collections"), "gc_collections_off": off.get("gc_collections"),
                   "peak_rss_mb_on": on.get("peak_rss_mb"), "peak_rss_mb_off": off.get("peak_rss_mb")}
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{figure:12} n={n:>6}: policy on {row['rate_on']:>9,.0f}/s (gc {gc_text(on)}), "
                      f"off {row['rate_off']:>9,.0f}/s (gc {gc_text(off)}): x{row['speedup']}", flush=True)


if __name__ == "__main__":
    main()
