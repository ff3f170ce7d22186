"""RecordingModel writes its file off the loop thread and keeps the order of the exchanges."""

from __future__ import annotations

import asyncio
import json
import threading

import toh_nb as tn
from toh_nb.models import record as record_module


def test_recording_writes_happen_in_a_worker_thread_in_exchange_order(tmp_path, monkeypatch):
    path = tmp_path / "rec.jsonl"
    writers = []

    async def inner(req):
        return f"answer {req.last_user_text}"

    model = tn.RecordingModel(tn.FunctionModel(inner), path)
    original = record_module.run_engine  # the recording hands each write to it

    def spy(fn, *args):
        def write():
            lines = len(path.read_text().splitlines()) if path.exists() else 0
            fn(*args)
            if len(path.read_text().splitlines()) == lines + 1:  # this call wrote a record
                writers.append(threading.current_thread() is threading.main_thread())

        return original(write)

    monkeypatch.setattr(record_module, "run_engine", spy)

    async def main():
        async with tn.AsyncHub(model) as hub:
            for n in range(3):
                await hub.run(f"q{n}")

    asyncio.run(main())
    assert writers == [False, False, False]  # asyncio.run's loop is on the main thread; writes were not
    answers = [json.loads(line)["response"]["text"] for line in path.read_text().splitlines()]
    assert answers == ["answer q0", "answer q1", "answer q2"]
