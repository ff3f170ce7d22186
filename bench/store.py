"""The JSONL store: sequential delegations per fsync policy, the disk's own fsync rate, the hand-off, reopening.

Four parts, one run:

1. ``disk_fsync``: the disk alone — N appends of one 100-byte line, each followed by
   ``fdatasync``, in a file beside the store (what ``fsync="always"`` can at best approach).
2. ``store_sequential_<policy>``: ``bench/sequential.py``'s work (N ``subagent`` calls in a row, each
   child answering at once) with ``store=<dir>`` and each policy, beside the in-memory store in the
   same run. For ``always`` it also prints the fsyncs the store issued per second (file + directory);
   every policy prints ``create_us``, the cost of creating one empty file in its run directory
   (measured before the run: each delegation creates one log, and on this machine's ext4 that cost
   differs 10-300 us between directories, so it explains most of the spread between runs), and every
   figure prints the process's CPU seconds for the run (``cpu``; all threads, kernel time included).
   Each store figure prints ``×memory``: its time per delegation over the in-memory store's.
3. ``thread_round_trip``: the hand-off every acknowledgement makes, alone — the loop queues a future
   for a thread (``SimpleQueue.put``), the thread resolves it on the loop (``call_soon_threadsafe``,
   as the writer does) and the loop resumes; no store work at all. ``store_never_bound`` is the rate
   ``fsync="never"`` would reach if the store added nothing but that one round trip per delegation
   (its time = memory's + one round trip): the floor of any design that acknowledges a child's turn
   from another thread before its result reaches the parent (issue 18.4's "within 2×").
4. ``store_reopen``: a store of ``--children`` continuable children holding ``--mb`` MB of logs in
   total (written directly: turns of three events whose user message is ≈ 1 KB), then ``AsyncHub(store=dir)`` + ``list_agents()``:
   ``cold`` the first time (no index: each child is listed from its log's head, and up to 8 MB of
   logs are checked in full), ``warm`` after that hub closed and left its listing index (which
   keeps the logs listed from their heads as such: each open checks another 8 MB of them). The
   listing is checked to hold every child as ``[ready]``; the target (≤ 1 s) applies to both.

``--dir DIR`` puts every directory under DIR (default: a temporary directory on the same disk as
``/tmp``); everything is removed afterwards. ``--skip-cold`` measures only the warm reopen (the cold
one reads every byte).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile

import _common as c
import sequential

TARGET_BATCH = 2000  # issue 18.4: the default policy >= 2,000 sequential delegations/s
REOPEN_TARGET_SECONDS = 1.0  # issue 18.5: 10,000 children / 1 GB open and list in <= 1 s


def disk_fsync_rate(directory: str, n: int) -> dict:
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = b"x" * 99 + b"\n"
    try:
        start = c.now()
        for _ in range(n):
            os.write(fd, line)
            os.fdatasync(fd)
        seconds = c.now() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return c.figure("disk_fsync", n, seconds, None, unit="fdatasync")


def create_cost_us(directory: str, n: int = 200) -> float:
    """Microseconds to create one empty file in ``directory`` (the inode allocation every new log
    pays, spare or not; on this machine's ext4 it varies 10-300 us from one directory to another)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    names = [os.path.join(directory, f".~probe-{i}") for i in range(n)]
    start = c.now()
    for name in names:
        os.close(os.open(name, flags, 0o644))
    seconds = c.now() - start
    for name in names:
        os.unlink(name)
    return round(seconds / n * 1e6, 1)


async def thread_round_trip(n: int) -> dict:
    """N loop -> thread -> loop round trips through the writer's own hand-off (see the module docstring)."""
    import threading
    from queue import SimpleQueue

    from toh_nb.store.writer import resolve_all

    loop = asyncio.get_running_loop()
    requests: SimpleQueue = SimpleQueue()

    def thread() -> None:
        while (future := requests.get()) is not None:
            loop.call_soon_threadsafe(resolve_all, [(future, None)])

    worker = threading.Thread(target=thread, daemon=True)
    worker.start()
    times = []
    try:
        for _ in range(n):
            start = c.now()
            future = loop.create_future()
            requests.put(future)
            await future
            times.append(c.now() - start)
    finally:
        requests.put(None)
        worker.join()
    times.sort()
    return c.figure("thread_round_trip", n, sum(times), None, unit="round trip",
                    median_us=round(times[len(times) // 2] * 1e6, 1), p99_us=round(times[int(len(times) * 0.99)] * 1e6, 1),
                    mean_us=round(sum(times) / n * 1e6, 1))


async def sequential_policy(directory: str, n: int, fsync: str | None) -> dict:
    import toh_nb.store.writer as writer_module

    counted = {"fsyncs": 0}
    real_datasync, real_dir = writer_module.datasync, writer_module.LogWriter._sync_dir_quietly

    def datasync(fd: int) -> None:
        counted["fsyncs"] += 1
        real_datasync(fd)

    def sync_dir(self) -> None:
        if self._dir_dirty:
            counted["fsyncs"] += 1
        real_dir(self)

    writer_module.datasync, writer_module.LogWriter._sync_dir_quietly = datasync, sync_dir
    run_dir = tempfile.mkdtemp(dir=directory) if fsync is not None else None
    create_us = create_cost_us(run_dir) if run_dir is not None else None
    try:
        result = await sequential.engine(n, run_dir, fsync)
    finally:
        writer_module.datasync, writer_module.LogWriter._sync_dir_quietly = real_datasync, real_dir
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
    name = "store_sequential_memory" if fsync is None else f"store_sequential_{fsync}"
    extra = {"fsyncs_per_s": round(counted["fsyncs"] / result["seconds"], 1)} if fsync == "always" else {}
    # CPU seconds of the whole process (loop, writer and sync threads): steadier than wall time on a
    # shared machine, and it includes the kernel's share (file creation, fdatasync)
    extra["gc_seconds"], extra["cpu_seconds"] = result["gc_seconds"], result["cpu_seconds"]
    if create_us is not None:
        extra["create_us"] = create_us
    return c.figure(name, n, result["seconds"], None, target=TARGET_BATCH if fsync == "batch" else None, **extra)


def write_store(directory: str, children: int, total_mb: int) -> int:
    """Logs as toh_nb writes them (header, descriptor, turns of three events, the user message
    ~1 KB), each child's log filled to its share of ``total_mb``."""
    per_child = max(0, (total_mb * 1024 * 1024) // children)
    body = "y" * 900
    total = 0

    def line(record: dict) -> bytes:
        return (json.dumps(record, separators=(",", ":")) + "\n").encode()

    with open(os.path.join(directory, "root.jsonl"), "wb") as f:
        total += f.write(line({"type": "session", "version": 1, "id": "root", "created": 1.0,
                               "delegation_depth": 0, "origin": "root"}))
    for i in range(children):
        cid = f"agent-{i + 1}"
        chunks = [line({"type": "session", "version": 1, "id": cid, "created": 2.0 + i, "delegation_depth": 1,
                        "parent_session": "root", "origin": "subagent"}),
                  line({"seq": 0, "kind": "subagent/descriptor", "time": 2.0,
                        "data": {"version": 2, "mode": "continuable", "provider": "spawn", "label": f"kid {i}"}})]
        seq = 1
        size = sum(map(len, chunks))
        while size < per_child:
            chunks.append(line({"seq": seq, "kind": "turn/start", "time": 3.0, "turn": seq}))
            chunks.append(line({"seq": seq + 1, "kind": "user/message", "time": 3.0, "turn": seq,
                                "message": {"role": "user", "content": [{"type": "text", "text": body}]}}))
            chunks.append(line({"seq": seq + 2, "kind": "turn/end", "time": 3.0, "turn": seq,
                                "data": {"reason": "completed"}}))
            size += sum(map(len, chunks[-3:]))
            seq += 3
        data = b"".join(chunks)
        with open(os.path.join(directory, cid + ".jsonl"), "wb") as f:
            total += f.write(data)
    return total


async def reopen_and_list(directory: str, children: int) -> float:
    from toh_nb.hub import AsyncHub

    start = c.now()
    hub = AsyncHub(c.model(lambda request: "ok"), store=directory, ids="sequential")
    listing = str(await hub.list_agents())
    seconds = c.now() - start
    await hub.close()
    rows = listing.splitlines()
    if len(rows) != children or not all("[ready]" in row for row in rows):
        raise SystemExit(f"store_reopen: expected {children} ready children, got {rows[:3]} … ({len(rows)})")
    return seconds


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000, help="sequential delegations per policy (default 2000)")
    p.add_argument("--fsync-n", type=int, default=200, help="fdatasync calls for the disk probe (default 200)")
    p.add_argument("--always-n", type=int, default=300, help="delegations with fsync=always (default 300)")
    p.add_argument("--children", type=int, default=10000, help="children in the reopened store (default 10000)")
    p.add_argument("--mb", type=int, default=1000, help="MB of logs in the reopened store (default 1000)")
    p.add_argument("--skip-cold", action="store_true", help="skip the cold (index-less) reopen")
    p.add_argument("--dir", default=None, help="where to create the directories (default: system temp)")
    p.add_argument("--json", action="store_true", help="print one JSON line per figure")
    args = p.parse_args()
    if args.dir is not None:
        os.makedirs(args.dir, exist_ok=True)
    base = tempfile.mkdtemp(prefix="toh-store-bench-", dir=args.dir)
    try:
        c.emit(disk_fsync_rate(base, args.fsync_n), args.json)
        await sequential.engine(20)  # warm-up, unreported
        memory = await sequential_policy(base, args.n, None)
        c.emit(memory, args.json)
        per_delegation = memory["seconds"] / memory["n"]
        for fsync, n in (("never", args.n), ("batch", args.n), ("always", args.always_n)):
            fig = await sequential_policy(base, n, fsync)
            fig["memory_ratio"] = round(fig["seconds"] / fig["n"] / per_delegation, 2)
            c.emit(fig, args.json)
        trip = await thread_round_trip(args.n)
        c.emit(trip, args.json)
        bound = (per_delegation + trip["mean_us"] / 1e6) * args.n
        c.emit(c.figure("store_never_bound", args.n, bound, None,
                        memory_ratio=round(bound / args.n / per_delegation, 2)), args.json)

        store_dir = os.path.join(base, "reopen")
        os.mkdir(store_dir)
        start = c.now()
        size = write_store(store_dir, args.children, args.mb)
        written = c.now() - start
        phases = {"generate": written}
        if not args.skip_cold:
            phases["cold"] = await reopen_and_list(store_dir, args.children)
        else:  # one unmeasured pass to verify the logs and leave the index
            await reopen_and_list(store_dir, args.children)
        warm = await reopen_and_list(store_dir, args.children)
        phases["warm"] = warm
        c.emit(c.figure("store_reopen", args.children, warm, None, store_bytes=size, store_mb=round(size / 2**20),
                        target_seconds=REOPEN_TARGET_SECONDS,
                        meets_target=max(phases.get("cold", 0.0), warm) <= REOPEN_TARGET_SECONDS,
                        phases=phases), args.json)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    c.run_main(main)
