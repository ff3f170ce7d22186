"""Run every benchmark at its default sizes and print one table (and the SPEC §8 verdicts).

Each (script, size) runs in its own Python process with ``--json`` so that peak RSS and garbage are
per figure. ``--json`` prints the collected figures as JSON lines instead of the table; ``--out FILE``
also writes them to FILE (one JSON line each). JSONL-store runs write to fresh sub-directories of
``--store-dir`` (default: a temporary directory, removed afterwards). ``--quick`` uses small sizes
(a smoke run); ``--full`` adds the slow sizes (continuable children with the JSONL store at 10,000,
N separate hubs at 10,000); ``--ray`` adds ``ray_children.py`` (needs the ``ray`` extra; it starts and
stops a local cluster, so it is left out of the default set). The default set finishes in about two and a half minutes on a 2-core
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import _common as c  # noqa: E402

STORE = "{store}"  # replaced by the JSONL run directory

DEFAULT = [
    ("sequential.py", [1000, 10000], []),
    ("sequential.py", [1000, 10000], ["--store", STORE]),
    ("one_message.py", [1000, 10000], []),
    ("many_roots.py", [100, 1000, 10000], []),
    ("background_jobs.py", [1000, 10000], []),
    ("continuable.py", [1000, 10000], []),
    ("continuable.py", [100, 1000], ["--store", STORE]),
    ("memory.py", [1000, 10000], []),
    ("facade.py", [10000], []),
]
FULL_EXTRA = [
    ("continuable.py", [10000], ["--store", STORE]),
    ("sequential.py", [100000], []),
    ("continuable.py", [100000], []),
    ("many_roots.py", [10000], ["--hubs-max", "10000"]),
]
RAY = [
    ("ray_children.py", [10000], []),
]
QUICK = [
    ("sequential.py", [100], []),
    ("sequential.py", [100], ["--store", STORE]),
    ("one_message.py", [100], []),
    ("many_roots.py", [100], []),
    ("background_jobs.py", [100], []),
    ("continuable.py", [100], []),
    ("continuable.py", [100], ["--store", STORE]),
    ("memory.py", [100], []),
    ("facade.py", [1000], []),
]


def run(script: str, n: int, extra: list[str], store_dir: str, timeout: float, repeat: int = 1) -> list[dict]:
    args = [sys.executable, os.path.join(HERE, script), "--json", "--n", str(n), "--repeat", str(repeat)]
    args += [store_dir if a == STORE else a for a in extra]
    started = time.perf_counter()
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [{"name": script[:-3], "n": n, "error": f"timed out after {timeout:.0f} s"}]
    figures = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            figures.append(json.loads(line))
    if done.returncode != 0 or not figures:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        figures.append({"name": script[:-3], "n": n, "error": f"exit {done.returncode}: {' | '.join(tail)}"})
    for fig in figures:
        fig["wall_s"] = round(time.perf_counter() - started, 1)
    return figures


def cell(value, fmt: str = "{:,.0f}") -> str:
    return "" if value is None else fmt.format(value)


def table(figures: list[dict]) -> str:
    head = ("figure", "n", "seconds", "rate/s", "floor rate/s", "×floor", "target", "met", "peak MB", "notes")
    rows = [head]
    for f in figures:
        if "error" in f or "skipped" in f:
            rows.append((f["name"], cell(f.get("n")), "", "", "", "", "", "", "",
                         f.get("error") or f"skipped: {f['skipped']}"))
            continue
        notes = ""
        target = cell(f.get("target"))
        if "median_us" in f:
            rate, floor_rate = f"{f['median_us']:.1f} µs med", cell(f.get("floor_median_us"), "{:.1f} µs med")
            target = f"≤{f['target_median_us']:.0f} µs" if "target_median_us" in f else ""
            notes = f"p99 {f['p99_us']:.0f} µs"
        elif "bytes_per_child" in f:
            rate = f"{f['bytes_per_child'] / 1024:.1f} KB/child"
            floor_rate = f"{f['floor_bytes_per_child'] / 1024:.1f} KB/child"
            target = f"≤{f['target_bytes_per_child'] // 1024} KB"
            notes = f"RSS {f['rss_bytes_per_child'] / 1024:.1f} KB/child"
        else:
            rate, floor_rate = cell(f.get("rate_per_s")), cell(f.get("floor_rate_per_s"))
            if "phases" in f:
                notes = " ".join(f"{k} {v:.2f}" for k, v in f["phases"].items())
        met = "" if "meets_target" not in f else ("yes" if f["meets_target"] else "NO")
        rows.append((f["name"], cell(f["n"]), cell(f.get("seconds"), "{:.3f}"), rate, floor_rate,
                     cell(f.get("ratio"), "{}"), target, met, cell(f.get("peak_rss_mb"), "{}"), notes))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(str(v).ljust(w) if j in (0, 9) else str(v).rjust(w)
                               for j, (v, w) in enumerate(zip(r, widths))).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def scaling(figures: list[dict]) -> list[str]:
    """SPEC §8 linear scaling: continuable throughput at 10,000 within 2× of 1,000; issue 18.2: at
    100,000 (``--full``) at least 0.9× the rate at 1,000, sequential and continuable."""
    out = []
    for name in ("continuable", "continuable_jsonl"):
        rates = {f["n"]: f["rate_per_s"] for f in figures if f.get("name") == name and f.get("rate_per_s")}
        if 1000 in rates and 10000 in rates:
            slowdown = rates[1000] / rates[10000]
            out.append(f"{name}: throughput at 1,000 / at 10,000 = {slowdown:.2f}× "
                       f"(target ≤ 2×: {'met' if slowdown <= 2 else 'MISSED'})")
    for name in ("sequential", "continuable"):
        rates = {f["n"]: f["rate_per_s"] for f in figures if f.get("name") == name and f.get("rate_per_s")}
        if 1000 in rates and 100000 in rates:
            kept = rates[100000] / rates[1000]
            out.append(f"{name}: throughput at 100,000 / at 1,000 = {kept:.2f}× "
                       f"(target ≥ 0.9×: {'met' if kept >= 0.9 else 'MISSED'})")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the figures as JSON lines instead of the table")
    p.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    p.add_argument("--full", action="store_true", help="also the slow sizes")
    p.add_argument("--ray", action="store_true", help="also the Ray children (needs the ray extra)")
    p.add_argument("--store-dir", default=None, help="parent directory of the JSONL runs (default: a temp dir)")
    p.add_argument("--out", default=None, help="also write the figures to this file (JSON lines)")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds allowed per (script, size)")
    p.add_argument("--repeat", type=int, default=1,
                   help="passed to every script: keep the fastest of this many runs (default 1)")
    args = p.parse_args()
    plan = QUICK if args.quick else DEFAULT + (FULL_EXTRA if args.full else [])
    if args.ray:
        plan = plan + RAY
    own_dir = args.store_dir is None
    store_dir = tempfile.mkdtemp(prefix="toh-bench-") if own_dir else args.store_dir
    started = time.perf_counter()
    figures: list[dict] = []
    try:
        for script, sizes, extra in plan:
            for n in sizes:
                for fig in run(script, n, extra, store_dir, args.timeout, args.repeat):
                    if script == "many_roots.py" and "--hubs-max" in extra and fig.get("name") == "many_roots":
                        continue  # the --full extra run only adds many_hubs at 10,000
                    figures.append(fig)
                    if args.json:
                        print(json.dumps(fig), flush=True)
                    else:
                        print(f"  {c.describe(fig) if 'error' not in fig else fig}", file=sys.stderr, flush=True)
    finally:
        if own_dir:
            shutil.rmtree(store_dir, ignore_errors=True)
    total = time.perf_counter() - started
    if args.out:
        with open(args.out, "w") as f:
            for fig in figures:
                f.write(json.dumps(fig) + "\n")
    if not args.json:
        print(table(figures))
        for line in scaling(figures):
            print(line)
        print(f"total wall time {total:.0f} s")


if __name__ == "__main__":
    main()
