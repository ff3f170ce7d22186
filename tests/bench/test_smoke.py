"""Smoke test of ``bench/``: every script runs at a tiny size and prints valid JSON figure lines.

No timing is asserted (speed is measured by the benchmarks, not by tests): only that each script
runs, checks its own work, and prints the figures it documents with the fields ``run_all.py`` reads.
The scripts run as subprocesses, concurrently, once per module.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench")
N = 20

# (script, extra arguments, the figure names it must print)
CASES = {
    "sequential": ("sequential.py", [], ["sequential"]),
    "sequential_jsonl": ("sequential.py", ["--store", "{tmp}"], ["sequential_jsonl"]),
    "one_message": ("one_message.py", [], ["one_message_pool10", "one_message_poolN"]),
    "many_roots": ("many_roots.py", [], ["many_roots", "many_hubs"]),
    "background_jobs": ("background_jobs.py", [], ["background_jobs", "background_jobs_batched"]),
    "continuable": ("continuable.py", [], ["continuable"]),
    "continuable_jsonl": ("continuable.py", ["--store", "{tmp}"], ["continuable_jsonl"]),
    "memory": ("memory.py", [], ["memory"]),
    "facade": ("facade.py", ["--n", "200"], ["facade", "facade_hub"]),
    "prefix_cache": ("prefix_cache.py", [], ["prefix_cache"]),
    "openai_path": ("openai_path.py", ["--repeat", "1"], ["openai_path"]),
    "store": ("store.py", ["--always-n", "20", "--fsync-n", "20", "--children", "20", "--mb", "1", "--dir", "{tmp}"],
              ["disk_fsync", "store_sequential_memory", "store_sequential_never", "store_sequential_batch",
               "store_sequential_always", "thread_round_trip", "store_never_bound", "store_reopen"]),
}
# figures allowed to be reported as skipped (their subject is optional or being written)
MAY_SKIP = {"sequential_jsonl", "continuable_jsonl", "facade_hub", "openai_path"}


def _run(case: str, tmp: str) -> subprocess.CompletedProcess:
    script, extra, _ = CASES[case]
    args = [sys.executable, os.path.join(BENCH, script), "--json", "--n", str(N)]
    args += [a.replace("{tmp}", os.path.join(tmp, case)) for a in extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    tmp = str(tmp_path_factory.mktemp("bench"))
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {case: pool.submit(_run, case, tmp) for case in CASES}
        return {case: future.result() for case, future in futures.items()}


def _figures(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"no output; stderr:\n{done.stderr}"
    figures = []
    for line in lines:
        value = json.loads(line)  # every stdout line is one JSON object
        assert isinstance(value, dict), line
        figures.append(value)
    return figures


def _measured(fig: dict, *keys: str, may_be_none: bool = False) -> None:
    """Each of ``keys`` is printed as a measured figure: a finite number >= 0 (``None`` where the script
    documents it, e.g. a ratio over a floor too quick to time). Its *size* is not checked: on a loaded
    machine a rounded ratio is 0.0 and a time a fraction of what it is on an idle one."""
    for key in keys:
        value = fig[key]
        if value is None and may_be_none:
            continue
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value >= 0, (key, value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_script_prints_its_figures(outputs, case):
    """Every documented figure is printed, with its fields; counts the script controls are exact, and
    measured values are numbers (never their size: see ``_measured``)."""
    figures = _figures(outputs[case])
    expected = CASES[case][2]
    assert [f["name"] for f in figures] == expected
    for fig in figures:
        if "skipped" in fig:
            assert fig["name"] in MAY_SKIP, fig
            assert isinstance(fig["skipped"], str) and fig["skipped"]
            continue
        expected_n = 200 if case == "facade" else N
        assert fig["n"] == expected_n
        _measured(fig, "seconds")
        _measured(fig, "rate_per_s", may_be_none=True)
        assert "peak_rss_mb" in fig
        if fig["name"].startswith("facade"):
            _measured(fig, "median_us", "p99_us", "floor_median_us")
            assert fig["median_us"] <= fig["p99_us"]  # an order of statistics, not a speed
            _measured(fig, "ratio", may_be_none=True)
        elif fig["name"].startswith(("disk_", "store_")):  # absolute figures (store.py): no floor
            if fig["name"] == "store_sequential_always":
                _measured(fig, "fsyncs_per_s")
            if fig["name"] in ("store_sequential_never", "store_sequential_batch", "store_sequential_always",
                               "store_never_bound"):
                _measured(fig, "memory_ratio")
            if fig["name"] == "store_reopen":
                assert set(fig["phases"]) == {"generate", "cold", "warm"} and fig["store_bytes"] > 0
        elif fig["name"] == "thread_round_trip":  # the acknowledgement's hand-off alone: no floor
            _measured(fig, "median_us", "p99_us", "mean_us")
            assert fig["median_us"] <= fig["p99_us"]
        elif fig["name"].startswith("memory"):
            _measured(fig, "bytes_per_child", "floor_bytes_per_child")
            _measured(fig, "ratio", may_be_none=True)
            assert fig["top_sites"] and all(":" in site for site, _ in fig["top_sites"])
        elif fig["name"] == "openai_path":  # same requests, same connections as the raw client
            assert fig["bodies_identical"] is True and fig["requests"] == N + 2
            assert fig["connections"] <= N + 2
            _measured(fig, "floor_seconds")
        elif fig["name"] == "prefix_cache":  # a share of tokens, not a speed: deterministic
            assert fig["broken"] == 0 and fig["compared"] > 0
            assert 0.5 < fig["reusable_share"] < 1 and 0 < fig["min_share_root"] <= fig["last_share_root"] < 1
        else:
            _measured(fig, "floor_seconds")
            _measured(fig, "ratio", may_be_none=True)
        if "target" in fig or "target_median_us" in fig or "target_bytes_per_child" in fig:
            assert isinstance(fig["meets_target"], bool)


def test_a_figure_of_any_size_passes_and_a_missing_or_non_numeric_one_fails():
    """The check above accepts what a loaded machine prints (a ratio rounded to 0.0) and rejects what a
    broken script prints."""
    _measured({"ratio": 0.0, "seconds": 0, "rate_per_s": None}, "ratio", "seconds")
    _measured({"rate_per_s": None}, "rate_per_s", may_be_none=True)
    for broken in ({"ratio": None}, {"ratio": "fast"}, {"ratio": -1.0}, {"ratio": float("nan")}, {"ratio": True}):
        with pytest.raises(AssertionError):
            _measured(broken, "ratio")
    with pytest.raises(KeyError):
        _measured({}, "ratio")


def test_jsonl_runs_record_the_store(outputs):
    for case in ("sequential_jsonl", "continuable_jsonl"):
        fig = _figures(outputs[case])[0]
        if "skipped" not in fig:
            assert fig["store"] == "jsonl" and fig["store_bytes"] > 0


def test_continuable_reports_every_phase(outputs):
    fig = _figures(outputs["continuable"])[0]
    assert list(fig["phases"]) == ["start", "settle", "send", "settle2", "list", "close"]
    assert fig["ops"] == N * 11


def test_run_all_table_and_scaling(outputs):
    sys.path.insert(0, BENCH)
    try:
        import run_all
    finally:
        sys.path.remove(BENCH)
    figures = [f for case in CASES for f in _figures(outputs[case])]
    text = run_all.table(figures)
    for name in ("sequential", "one_message_pool10", "continuable", "memory", "facade"):
        assert f"\n{name} " in text
    fast = dict(figures[0], name="continuable", n=1000, rate_per_s=3000.0)
    slow = dict(fast, n=10000, rate_per_s=1000.0)
    assert run_all.scaling([fast, slow]) == [
        "continuable: throughput at 1,000 / at 10,000 = 3.00× (target ≤ 2×: MISSED)"]
    huge = dict(fast, n=100000, rate_per_s=2850.0)
    sequential = [dict(fast, name="sequential"), dict(huge, name="sequential", rate_per_s=2400.0)]
    assert run_all.scaling([fast, huge] + sequential) == [
        "sequential: throughput at 100,000 / at 1,000 = 0.80× (target ≥ 0.9×: MISSED)",
        "continuable: throughput at 100,000 / at 1,000 = 0.95× (target ≥ 0.9×: met)"]


def test_bad_size_is_refused():
    done = subprocess.run([sys.executable, os.path.join(BENCH, "sequential.py"), "--n", "0"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert "sizes must be >= 1" in done.stderr
