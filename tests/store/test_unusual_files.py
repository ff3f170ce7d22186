"""Files a store did not write: non-regular files never block, every `<id>.jsonl` reserves its id,
and a clean prefix of a valid log (a child killed during its start) is never "corrupt"."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time

import pytest

import toh_nb as tn
from toh_nb.testing import engine_of
from toh_nb.core.errors import StoreError
from toh_nb.core.session import SessionHeader
from toh_nb.store.jsonl import JsonlStore


def construct_within(seconds: float, *args, **kwargs) -> JsonlStore:
    """Build the store on a daemon thread so a regression hangs only that thread, not the suite."""
    box: list = []
    thread = threading.Thread(target=lambda: box.append(JsonlStore(*args, **kwargs)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert box, f"JsonlStore({args[0]}) did not return within {seconds} s"
    return box[0]


def make_unusual_files(directory) -> dict[str, str]:
    """A FIFO, a directory and (where the path is short enough) a socket, each named <id>.jsonl."""
    directory.mkdir(exist_ok=True)
    os.mkfifo(directory / "agent-3.jsonl")
    (directory / "agent-4.jsonl").mkdir()
    kinds = {"agent-3": "a FIFO", "agent-4": "a directory"}
    path = str(directory / "agent-5.jsonl")
    if len(path) < 100:
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.close()
        kinds["agent-5"] = "a socket"
    return kinds


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_device_socket_or_directory_named_like_a_log_never_blocks_and_is_reported(tmp_path):
    kinds = make_unusual_files(tmp_path)
    with JsonlStore(tmp_path) as seed:
        seed.create(SessionHeader("agent-1", 1.0, origin="root"))
    store = construct_within(10, tmp_path)
    try:
        for session_id, kind in kinds.items():
            assert store.diagnostic(session_id) == "unreadable"
            assert store.problem(session_id) == f"cannot read the log (not a regular file ({kind}))"
            with pytest.raises(StoreError, match=rf'session log "{session_id}" is unreadable: cannot read the log '
                                                 rf"\(not a regular file \({kind}\)\)"):
                store.open(session_id)
            assert store.exists(session_id)
        assert sorted(store.reserved_ids()) == sorted(["agent-1", *kinds])
        assert [h.id for h in store.headers()] == ["agent-1"]
    finally:
        store.close()
    assert JsonlStore(tmp_path, read_only=True).diagnostic("agent-3") == "unreadable"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_hub_opens_a_store_holding_a_fifo_and_skips_its_id(tmp_path):
    make_unusual_files(tmp_path)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await kid.wait()
            return kid.id

    box: list = []
    thread = threading.Thread(target=lambda: box.append(asyncio.run(main())), daemon=True)
    thread.start()
    thread.join(30)
    assert box == ["agent-6"]


@pytest.mark.parametrize("content, problem", [
    (b"{not json\n", "line 1: header is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
                     "(char 1))"),
    (b"", "line 1: empty log (no header)"),
    (b'{"type":"session","id":"agent-7","created":1.0}\n', "line 1: header names session 'agent-7', not the file's "
                                                          "'agent-2'"),
])
def test_sequential_ids_skip_a_corrupt_log(tmp_path, content, problem):
    (tmp_path / "agent-2.jsonl").write_bytes(content)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            kid = await hub.start("t", label="kid")
            await kid.wait()
            return kid.id, str(await hub.list_agents())

    # a log naming no parent is listed where the root looks, never dropped
    assert asyncio.run(main()) == ("agent-3", f"agent-3 [ready] \u2014 kid\nagent-2 [diagnostic: corrupt: {problem}]")


# -- clean prefixes -------------------------------------------------------------------------------------

HEADER = {"type": "session", "version": 1, "id": "agent-1", "created": 1.0, "delegation_depth": 1,
          "parent_session": "root", "origin": "subagent"}
ONE_SHOT = {"seq": 0, "kind": "subagent/descriptor", "time": 1.0,
            "data": {"version": 2, "mode": "one-shot", "provider": "spawn", "label": "x"}}
CONTINUABLE = {"seq": 0, "kind": "subagent/descriptor", "time": 1.0,
               "data": {"version": 2, "mode": "continuable", "provider": "spawn", "label": "kept"}}
TURN = {"seq": 1, "kind": "turn/start", "time": 1.0, "turn": 1}


def line(record: dict) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("content, diagnostic", [
    (line(HEADER), None),                                              # header only (older one-shot start)
    (line(HEADER) + line(TURN | {"seq": 0}), None),                    # header + turn/start (older versions)
    (line(HEADER) + line(ONE_SHOT), None),                             # header + descriptor
    (line(HEADER) + line(ONE_SHOT) + line(TURN), None),                # killed right after the turn started
    (line(HEADER) + line(ONE_SHOT)[:30], "torn-tail"),                 # torn descriptor line
    (line(HEADER) + line(ONE_SHOT) + line(TURN)[:10], "torn-tail"),    # torn turn/start
])
def test_a_one_shot_child_killed_during_its_start_is_never_listed_corrupt(tmp_path, content, diagnostic):
    with JsonlStore(tmp_path) as store:
        store.create(SessionHeader("root", 0.5, origin="root"))
    (tmp_path / "agent-1.jsonl").write_bytes(content)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            assert engine_of(hub).store.diagnostic("agent-1") == diagnostic
            return str(await hub.list_agents()), str(await hub.list_agents("descendants"))

    assert asyncio.run(main()) == ("(no subagents)", "(no subagents)")


@pytest.mark.parametrize("tail", [b"", line(TURN), line(TURN)[:12]])
def test_a_continuable_child_cut_after_its_descriptor_lists_ready(tmp_path, tail):
    with JsonlStore(tmp_path) as store:
        store.create(SessionHeader("root", 0.5, origin="root"))
    (tmp_path / "agent-1.jsonl").write_bytes(line(HEADER) + line(CONTINUABLE) + tail)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            return str(await hub.list_agents())

    assert asyncio.run(main()) == "agent-1 [ready] \u2014 kept"


def test_a_one_shot_childs_descriptor_is_written_with_its_header(tmp_path):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path), ids="sequential") as hub:
            await hub.spawn("once", label="once")

    asyncio.run(main())
    records = [json.loads(raw) for raw in (tmp_path / "agent-1.jsonl").read_bytes().splitlines()]
    assert records[0]["type"] == "session"
    assert (records[1]["kind"], records[1]["data"]["mode"], records[1]["data"]["label"]) == (
        "subagent/descriptor", "one-shot", "once")
    assert records[2]["kind"] == "turn/start"
    assert time.time() >= records[1]["time"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_the_sync_facade_opens_a_store_holding_a_fifo_and_other_hubs_keep_working(tmp_path):
    make_unusual_files(tmp_path / "runs")
    box: list = []

    def use() -> None:
        with tn.Hub(tn.FunctionModel(lambda r: "ok"), store=str(tmp_path / "runs"), ids="sequential") as hub, \
                tn.Hub(tn.FunctionModel(lambda r: "fine"), ids="sequential") as other:
            box.append((hub.spawn("x").text, other.spawn("y").text, str(hub.list_agents())))

    thread = threading.Thread(target=use, daemon=True)
    thread.start()
    thread.join(60)
    assert box == [("ok", "fine", "(no subagents)")]
