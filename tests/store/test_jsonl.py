"""The JSONL store: round trips, ordering, torn tails, corruption, id safety, locking, crashes."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import toh_nb.store.jsonl as jsonl_module
from toh_nb.testing import engine_of
import toh_nb.store.writer as writer_module
from toh_nb.core.content import Message, Source, Text, ToolCallBlock, ToolResultBlock, Usage, user_message
from toh_nb.core.errors import StoreError, UsageError
from toh_nb.core.session import (ASSISTANT_MESSAGE, DESCRIPTOR, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START,
                                 USER_MESSAGE, Event, SessionHeader)
from toh_nb.store import SessionStore, open_store
from toh_nb.store.jsonl import JsonlStore

from ..helpers import until

HERE = Path(__file__).resolve().parent
#: the crash helpers run in their own processes: they import the package under test, not an installed one
HELPER_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(HERE.parents[1]), os.environ.get("PYTHONPATH")) if p)}


def header(session_id: str, created: float = 1.0, parent: str | None = None, **extra) -> SessionHeader:
    return SessionHeader(session_id, created, parent_session=parent,
                         origin="subagent" if parent else "root", **extra)


def fill(session) -> None:
    """Append one event of every kind, with messages carrying tool calls, results, sources, usage."""
    session.append(TURN_START, turn=1)
    session.append(USER_MESSAGE, turn=1, message=user_message(
        "multi\nline ünïcödé ✓ \"quoted\" \\ 😀 lone \ud800", id="msg-1",
        source=Source("subagent-report", form="relay", sender="agent-2", summary="done")))
    session.append(ASSISTANT_MESSAGE, turn=1, message=Message(
        "assistant", [Text("thinking"), ToolCallBlock("call-1", "subagent", {"prompt": "go", "n": [1, 2.5, None]})],
        id="msg-2", usage=Usage(12, 34)))
    session.append(TOOL_CALL, turn=1, data={"call_id": "call-1", "name": "subagent", "arguments": {"prompt": "go"}})
    session.append(TOOL_RESULT, turn=1, message=Message(
        "tool", [ToolResultBlock("call-1", "subagent", "Error: boom", is_error=True)]))
    session.append(USER_MESSAGE, turn=1, message=user_message("plugin note", source=Source("plugin", plugin="p1")))
    session.append(DESCRIPTOR, turn=1, data={"version": 1, "mode": "continuable", "label": "worker"})
    session.append(TURN_END, turn=1, data={"reason": "completed"})


def as_json(events) -> list[dict]:
    return [e.to_json() for e in events]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def log_path(store_dir: Path, session_id: str) -> Path:
    return store_dir / f"{session_id}.jsonl"


@pytest.fixture
def store_dir(tmp_path) -> Path:
    return tmp_path / "store"


# -- round trip ----------------------------------------------------------------------------------


def test_round_trip_through_a_new_store(store_dir):
    store = JsonlStore(store_dir)
    assert isinstance(store, SessionStore)
    seed = [Event(0, USER_MESSAGE, 5.0, 1, user_message("inherited")), Event(1, TURN_START, 5.5, 1)]
    session = store.create(header("agent-1", 10.0, "root", delegation_depth=2, seed_length=2), seed)
    fill(session)
    assert store.open("agent-1") is session
    expected_events = as_json(session.events)
    expected_header = session.header
    store.close()

    lines = lines_of(log_path(store_dir, "agent-1"))
    assert lines[0] == {"type": "session", "version": 1, "id": "agent-1", "created": 10.0, "delegation_depth": 2,
                        "parent_session": "root", "origin": "subagent", "seed_length": 2}
    assert lines[1:] == expected_events
    assert [line["seq"] for line in lines[1:]] == list(range(10))
    raw = log_path(store_dir, "agent-1").read_bytes()
    assert raw.count(b"\n") == 11 and raw.endswith(b"\n") and raw.isascii()
    for line in raw.splitlines():  # compact JSON, one line per record
        assert line == json.dumps(json.loads(line), separators=(",", ":")).encode()

    again = JsonlStore(store_dir)
    loaded = again.open("agent-1")
    assert loaded is not session
    assert loaded.header == expected_header
    assert as_json(loaded.events) == expected_events
    assert loaded.events[3].message.source == Source("subagent-report", form="relay", sender="agent-2", summary="done")
    assert loaded.events[3].message.text == "multi\nline ünïcödé ✓ \"quoted\" \\ 😀 lone \ud800"
    assert loaded.events[4].message.tool_calls[0].arguments == {"prompt": "go", "n": [1, 2.5, None]}
    assert loaded.events[4].message.usage == Usage(12, 34)
    assert loaded.events[6].message.is_error and loaded.events[6].message.tool_call_id == "call-1"
    assert loaded.descriptor == {"version": 1, "mode": "continuable", "label": "worker"}
    assert [e.kind for e in loaded.own_events()][:2] == [TURN_START, USER_MESSAGE]
    assert again.open("agent-1") is loaded
    assert again.diagnostic("agent-1") is None
    # the reloaded session keeps appending to the same file
    loaded.append(TURN_START, turn=2)
    again.close()
    assert lines_of(log_path(store_dir, "agent-1"))[-1]["kind"] == TURN_START
    assert lines_of(log_path(store_dir, "agent-1"))[-1]["seq"] == 10


def test_open_store_builds_a_jsonl_store_with_options(store_dir):
    store = open_store(str(store_dir), fsync="never", batch_interval=1.0)
    assert isinstance(store, JsonlStore) and store.fsync == "never" and store.batch_interval == 1.0
    store.close()
    path_store = open_store(store_dir)
    assert isinstance(path_store, JsonlStore) and path_store.fsync == "batch"
    path_store.close()


def test_missing_directory_is_created_and_options_are_checked(tmp_path):
    nested = tmp_path / "a" / "b" / "store"
    with JsonlStore(nested) as store:
        assert nested.is_dir() and store.headers() == []
    with pytest.raises(UsageError, match='fsync must be "batch", "always" or "never", got \'sometimes\''):
        JsonlStore(tmp_path / "x", fsync="sometimes")
    with pytest.raises(UsageError, match="batch_interval"):
        JsonlStore(tmp_path / "x", batch_interval=-1)
    with pytest.raises(UsageError, match="max_open"):
        JsonlStore(tmp_path / "x", max_open=0)
    with pytest.raises(StoreError, match="does not exist"):
        JsonlStore(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "x").exists() and not (tmp_path / "missing").exists()


def test_children_in_creation_order_across_reopen(store_dir):
    store = JsonlStore(store_dir)
    store.create(header("root", 1.0))
    store.create(header("agent-3", 5.0, "root"))
    store.create(header("agent-1", 3.0, "root"))  # created earlier (clock), inserted before agent-3
    store.create(header("agent-10", 7.0, "root"))
    store.create(header("agent-9", 7.0, "root"))  # same time: digit runs compare as numbers
    store.create(header("agent-2", 4.0, "agent-1"))
    expected = ["agent-1", "agent-3", "agent-9", "agent-10"]
    assert [h.id for h in store.children_of("root")] == expected
    assert [h.id for h in store.children_of("agent-1")] == ["agent-2"]
    assert store.children_of("agent-2") == [] and store.children_of("no such") == []
    assert [h.id for h in store.headers()] == ["root", "agent-1", "agent-2", "agent-3", "agent-9", "agent-10"]
    store.close()
    again = JsonlStore(store_dir)
    assert [h.id for h in again.children_of("root")] == expected
    assert [h.id for h in again.headers()] == ["root", "agent-1", "agent-2", "agent-3", "agent-9", "agent-10"]
    assert again.children_of("root")[0] == SessionHeader("agent-1", 3.0, parent_session="root", origin="subagent")
    assert len(again) == 6 and again.exists("agent-9") and "agent-9" in again and not again.exists("agent-99")
    again.close()


def test_duplicate_ids_and_unknown_ids(store_dir):
    store = JsonlStore(store_dir)
    store.create(header("agent-1"))
    with pytest.raises(StoreError, match='session "agent-1" already exists'):
        store.create(header("agent-1"))
    with pytest.raises(KeyError):
        store.open("agent-2")
    assert store.diagnostic("agent-2") is None
    store.close()
    again = JsonlStore(store_dir)
    with pytest.raises(StoreError, match='session "agent-1" already exists'):
        again.create(header("agent-1"))
    again.close()


def test_live_session_is_shared_and_reloaded_after_it_is_dropped(store_dir, monkeypatch):
    monkeypatch.setattr(jsonl_module, "RECENT_SESSIONS", 0)  # nothing held strongly but by its users
    store = JsonlStore(store_dir)
    session = store.create(header("agent-1"))
    session.append(TURN_START, turn=1)
    assert store.open("agent-1") is session
    expected = as_json(session.events)
    del session
    gc.collect()
    reloaded = store.open("agent-1")
    assert as_json(reloaded.events) == expected
    assert store.open("agent-1") is reloaded
    reloaded.append(TURN_END, turn=1, data={"reason": "completed"})
    store.close()
    assert [line.get("kind") for line in lines_of(log_path(store_dir, "agent-1"))] == [None, TURN_START, TURN_END]


def test_diagnostic_then_open_reads_a_log_once(store_dir, monkeypatch):
    with JsonlStore(store_dir) as store:
        fill(store.create(header("agent-1")))
    reads = []
    real = jsonl_module.parse_log
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: reads.append(sid) or real(data, sid))
    with JsonlStore(store_dir) as store:
        assert store.diagnostic("agent-1") is None
        assert len(store.open("agent-1").events) == 8
        assert store.diagnostic("agent-1") is None
    assert reads == ["agent-1"]


def test_unserialisable_event_is_refused_and_the_log_stays_intact(store_dir):
    store = JsonlStore(store_dir)
    session = store.create(header("agent-1"))
    session.append(TURN_START, turn=1)
    with pytest.raises(StoreError, match='cannot store event 1 of session "agent-1"'):
        session.append(TOOL_CALL, turn=1, data={"arguments": object()})
    store.close()
    with JsonlStore(store_dir) as again:
        assert [e.kind for e in again.open("agent-1").events] == [TURN_START]
        assert again.diagnostic("agent-1") is None


# -- torn tails and corruption ---------------------------------------------------------------------


def _three_events(store_dir: Path, session_id: str = "agent-1", parent: str | None = "root") -> list[dict]:
    with JsonlStore(store_dir) as store:
        session = store.create(header(session_id, 2.0, parent))
        session.append(TURN_START, turn=1)
        session.append(USER_MESSAGE, turn=1, message=user_message("hello"))
        session.append(TURN_END, turn=1, data={"reason": "completed"})
        return as_json(session.events)


@pytest.mark.parametrize("tail", [b'{"seq":3,"kind":"turn/st', b"\x00\x00\x00\x00", b"garbage\n", b"  "])
def test_torn_tail_is_ignored_reported_and_repaired(store_dir, tail):
    expected = _three_events(store_dir)
    path = log_path(store_dir, "agent-1")
    with path.open("ab") as handle:
        handle.write(tail)

    store = JsonlStore(store_dir)
    assert [h.id for h in store.children_of("root")] == ["agent-1"]
    assert store.diagnostic("agent-1") == "torn-tail"
    assert store.problem("agent-1").startswith("line 5: ")
    session = store.open("agent-1")
    assert as_json(session.events) == expected
    assert path.read_bytes().endswith(tail)  # reading never modifies the file
    event = session.append(TURN_START, turn=2)
    assert event.seq == 3
    session.append(USER_MESSAGE, turn=2, message=user_message("after the crash"))
    assert store.diagnostic("agent-1") == "torn-tail"  # still reported for this store's lifetime
    store.close()

    lines = lines_of(path)  # every line parses again
    assert [line.get("seq") for line in lines] == [None, 0, 1, 2, 3, 4]
    with JsonlStore(store_dir) as again:
        assert again.diagnostic("agent-1") is None
        assert [e.kind for e in again.open("agent-1").events] == [TURN_START, USER_MESSAGE, TURN_END, TURN_START,
                                                                 USER_MESSAGE]


def test_complete_but_unterminated_last_line_is_kept(store_dir):
    expected = _three_events(store_dir)
    path = log_path(store_dir, "agent-1")
    extra = {"seq": 3, "kind": TURN_START, "time": 9.0, "turn": 2}
    with path.open("ab") as handle:
        handle.write(json.dumps(extra).encode())  # the newline never made it
    store = JsonlStore(store_dir)
    assert store.diagnostic("agent-1") is None
    session = store.open("agent-1")
    assert as_json(session.events) == expected + [extra]
    session.append(TURN_END, turn=2, data={"reason": "completed"})
    store.close()
    assert [line.get("seq") for line in lines_of(path)] == [None, 0, 1, 2, 3, 4]


def test_torn_tail_in_a_read_only_store_is_not_repaired(store_dir):
    _three_events(store_dir)
    path = log_path(store_dir, "agent-1")
    with path.open("ab") as handle:
        handle.write(b'{"seq":3')
    before = path.read_bytes()
    with JsonlStore(store_dir, read_only=True) as reader:
        session = reader.open("agent-1")
        assert len(session.events) == 3 and reader.diagnostic("agent-1") == "torn-tail"
        with pytest.raises(StoreError, match="read-only"):
            session.append(TURN_START, turn=2)
    assert path.read_bytes() == before


def test_corrupt_middle_line_makes_only_that_session_corrupt(store_dir):
    _three_events(store_dir, "agent-1")
    other = _three_events(store_dir, "agent-2")
    path = log_path(store_dir, "agent-1")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"seq":1,"kind":"user/mess\n'  # line 3 of 5 is damaged
    path.write_bytes(b"".join(lines))

    store = JsonlStore(store_dir)
    assert [h.id for h in store.children_of("root")] == ["agent-1", "agent-2"]  # still listed by header
    assert store.diagnostic("agent-1") == "corrupt"
    assert store.problem("agent-1").startswith("line 3: JSONDecodeError")
    with pytest.raises(StoreError, match='session log "agent-1" is corrupt: line 3: '):
        store.open("agent-1")
    assert store.exists("agent-1") and store.corrupt_ids() == []
    assert store.diagnostic("agent-2") is None
    assert as_json(store.open("agent-2").events) == other
    assert [h.id for h in store.headers()] == ["agent-1", "agent-2"]
    store.close()


@pytest.mark.parametrize("content, problem", [
    (b"not json at all\n", "line 1: header is not JSON"),
    (b"", "line 1: empty log (no header)"),
    (b'{"seq":0,"kind":"turn/start","time":1.0}\n', 'line 1: first line is not a session header'),
    (b'{"type":"session","id":"agent-7","created":1.0}\n', "line 1: header names session 'agent-7', not the file's 'agent-5'"),
    (b'{"type":"session","id":"agent-5"}\n',
     "line 1: invalid header (header created: expected a number (seconds since the epoch), but it is missing)"),
])
def test_unreadable_header_is_reported_by_id(store_dir, content, problem):
    fine = _three_events(store_dir, "agent-1")
    log_path(store_dir, "agent-5").write_bytes(content)
    store = JsonlStore(store_dir)
    assert store.corrupt_ids() == ["agent-5"]
    assert store.diagnostic("agent-5") == "corrupt"
    assert store.problem("agent-5").startswith(problem)
    assert store.exists("agent-5") and len(store) == 2
    assert [h.id for h in store.headers()] == ["agent-1"]
    assert [h.id for h in store.children_of("root")] == ["agent-1"]
    with pytest.raises(StoreError, match='session log "agent-5" is corrupt: line 1: '):
        store.open("agent-5")
    with pytest.raises(StoreError, match='session "agent-5" already exists'):
        store.create(header("agent-5"))
    assert as_json(store.open("agent-1").events) == fine
    store.close()
    assert log_path(store_dir, "agent-5").read_bytes() == content


def test_foreign_files_and_leftover_temporary_logs(store_dir):
    store_dir.mkdir()
    (store_dir / "notes.txt").write_text("hello")
    (store_dir / ".hidden.jsonl").write_text("x")
    (store_dir / "a..b.jsonl").write_text("x")
    (store_dir / ".agent-1.jsonl.tmp").write_text('{"type":"session","id":"agent-1","created":1.0}\n{"seq')
    with JsonlStore(store_dir) as store:
        assert store.headers() == [] and store.corrupt_ids() == [] and len(store) == 0
        assert not (store_dir / ".agent-1.jsonl.tmp").exists()  # an interrupted create is cleaned up
        store.create(header("agent-1"))
    assert sorted(p.name for p in store_dir.iterdir()) == [".hidden.jsonl", ".lock", ".toh-index.json", "a..b.jsonl",
                                                          "agent-1.jsonl", "notes.txt"]


# -- id safety ---------------------------------------------------------------------------------------


BAD_IDS = ["../x", "a/b", "/abs", "a\x00b", "..", "", "x" * 300, ".", ".hidden", "a\\b", "a b", "../../etc/passwd",
           "agent-1/../../x", "x\n", "ü"]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("bad", BAD_IDS)
def test_traversal_ids_are_refused_before_touching_the_file_system(tmp_path, bad):
    store_dir = tmp_path / "inner" / "store"
    store = JsonlStore(store_dir)
    before = _tree(tmp_path)
    parent_listing = sorted(os.listdir(tmp_path.parent))
    with pytest.raises(StoreError, match="invalid session id") as caught:
        store.create(header(bad))
    assert repr(bad) in str(caught.value)
    with pytest.raises(StoreError, match="invalid session id"):
        store.create(header(bad, parent="root"))
    with pytest.raises(KeyError):
        store.open(bad)
    assert not store.exists(bad) and store.diagnostic(bad) is None and store.children_of(bad) == []
    store.close()
    assert _tree(tmp_path) == before == ["inner", "inner/store", "inner/store/.lock"]
    assert sorted(os.listdir(tmp_path.parent)) == parent_listing


def test_a_parent_id_is_data_not_a_path(store_dir, tmp_path):
    with JsonlStore(store_dir) as store:
        store.create(header("agent-1", parent="../../evil"))
        assert [h.id for h in store.children_of("../../evil")] == ["agent-1"]
    assert _tree(tmp_path) == ["store", "store/.lock", "store/.toh-index.json", "store/agent-1.jsonl"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_appends_never_follow_a_symlinked_log(store_dir, tmp_path):
    outside = tmp_path / "outside.jsonl"
    store = JsonlStore(store_dir)
    session = store.create(header("agent-1"))
    store.close()
    path = log_path(store_dir, "agent-1")
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)
    store = JsonlStore(store_dir)
    session = store.open("agent-1")  # reading through the link is harmless
    with pytest.raises(StoreError, match='cannot append to session log "agent-1"'):
        session.append(TURN_START, turn=1)
    store.close()
    assert len(outside.read_bytes().splitlines()) == 1


# -- locking -------------------------------------------------------------------------------------------


def test_one_writer_per_directory_and_read_only_alongside(store_dir):
    writer = JsonlStore(store_dir)
    session = writer.create(header("agent-1"))
    session.append(TURN_START, turn=1)
    with pytest.raises(StoreError) as caught:
        JsonlStore(store_dir)
    assert str(caught.value) == (
        f"store directory {store_dir} is in use by another hub (pid {os.getpid()}, this process); open it "
        f"read-only with JsonlStore({str(store_dir)!r}, read_only=True) or close the other hub first "
        "(hub.close(); in a notebook, re-running `hub = tn.Hub(store=...)` needs the previous hub closed, "
        "which `with tn.Hub(store=...) as hub:` does for you)")

    reader = JsonlStore(store_dir, read_only=True)
    assert [h.id for h in reader.headers()] == ["agent-1"]
    seen = reader.open("agent-1")
    assert [e.kind for e in seen.events] == [TURN_START]
    with pytest.raises(StoreError, match="is read-only: cannot append to session \"agent-1\""):
        seen.append(TURN_END, turn=1, data={"reason": "completed"})
    with pytest.raises(StoreError, match="is read-only"):
        reader.create(header("agent-2"))
    reader.close()
    session.append(TURN_END, turn=1, data={"reason": "completed"})  # the writer is unaffected

    writer.close()
    writer.close()  # idempotent
    assert writer.closed
    with pytest.raises(StoreError, match="is closed"):
        session.append(TURN_START, turn=2)
    with pytest.raises(StoreError, match="is closed"):
        writer.create(header("agent-2"))
    assert [h.id for h in writer.headers()] == ["agent-1"]  # the index stays readable

    successor = JsonlStore(store_dir)  # the lock was released
    assert [e.kind for e in successor.open("agent-1").events] == [TURN_START, TURN_END]
    successor.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_closing_a_forked_copy_keeps_the_parents_lock(store_dir):
    store = JsonlStore(store_dir)
    store.create(header("agent-1")).append(TURN_START, turn=1)
    pid = os.fork()
    if pid == 0:  # the child closes its copy of the store (as a GC of an inherited hub would)
        try:
            store.close()
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    with pytest.raises(StoreError, match="is in use by another hub"):
        JsonlStore(store_dir)
    store.open("agent-1").append(TURN_END, turn=1, data={"reason": "completed"})  # the parent still writes
    store.close()
    with JsonlStore(store_dir) as again:
        assert [e.kind for e in again.open("agent-1").events] == [TURN_START, TURN_END]


def test_a_closed_store_never_reads_relative_to_the_working_directory(store_dir, tmp_path, monkeypatch):
    with JsonlStore(store_dir) as store:
        store.create(header("agent-1"))
    (store_dir / ".toh-index.json").unlink()  # so that the log is unverified: diagnostic() must read it
    store = JsonlStore(store_dir)
    store.close()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "agent-1.jsonl").write_text("decoy")
    with pytest.raises(StoreError, match='is closed: cannot read session log "agent-1"'):
        store.open("agent-1")
    with pytest.raises(StoreError, match="is closed"):
        store.diagnostic("agent-1")


def test_an_abandoned_store_releases_its_lock_when_collected(store_dir):
    JsonlStore(store_dir).create(header("agent-1"))
    gc.collect()
    with JsonlStore(store_dir) as store:
        assert store.exists("agent-1")


def test_lock_held_by_another_process_names_its_pid(store_dir):
    script = textwrap.dedent(f"""
        import sys
        from toh_nb.store.jsonl import JsonlStore
        store = JsonlStore({str(store_dir)!r})
        print("ready", flush=True)
        sys.stdin.read()
        store.close()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        with pytest.raises(StoreError, match=rf"is in use by another hub \(pid {proc.pid}\); open it read-only"):
            JsonlStore(store_dir)
        JsonlStore(store_dir, read_only=True).close()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    JsonlStore(store_dir).close()


# -- durability policies and descriptors -------------------------------------------------------------------


@pytest.fixture
def syncs(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = writer_module.datasync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(writer_module, "datasync", counting)
    return calls


def test_fsync_always_syncs_the_directory_before_acknowledging_a_new_log(store_dir, monkeypatch):
    dir_syncs = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: dir_syncs.append(fd) or real(fd))
    store = JsonlStore(store_dir, fsync="always")
    store.create(header("agent-1"))
    assert len(dir_syncs) == 1  # the new name is durable when create returns
    store.create(header("agent-2")).append(TURN_START, turn=1)
    assert len(dir_syncs) == 2
    store.close()


def test_fsync_always_syncs_every_append(store_dir, syncs):
    store = JsonlStore(store_dir, fsync="always")
    session = store.create(header("agent-1"))
    assert len(syncs) == 1
    for turn in range(5):
        session.append(TURN_START, turn=turn)
    assert len(syncs) == 6
    store.close()
    assert len(syncs) == 6  # nothing was pending


def test_fsync_batch_syncs_when_the_interval_elapsed_and_on_flush_and_close(store_dir, syncs):
    store = JsonlStore(store_dir, fsync="batch", batch_interval=3600)
    session = store.create(header("agent-1"))
    for turn in range(5):
        session.append(TURN_START, turn=turn)
    assert syncs == []
    store.flush(session)
    assert len(syncs) == 1
    store.flush()
    assert len(syncs) == 1  # nothing pending any more
    session.append(TURN_START, turn=6)
    store.close()
    assert len(syncs) == 2

    # the interval's syncs run on the store's sync thread, after the append returned
    eager = JsonlStore(store_dir, fsync="batch", batch_interval=0)
    reopened = eager.open("agent-1")
    reopened.append(TURN_START, turn=7)
    asyncio.run(until(lambda: len(syncs) == 3, "the sync thread to sync the appended log"))
    reopened.append(TURN_START, turn=8)
    asyncio.run(until(lambda: len(syncs) == 4, "the sync thread to sync it again"))
    eager.close()
    assert len(syncs) == 4  # nothing was pending any more


def test_a_batch_pass_with_many_logs_syncs_their_file_system_once(store_dir, syncs, monkeypatch):
    """A burst of new logs costs the background pass one ``syncfs`` instead of one sync per log; a
    pass with few logs, or one where ``syncfs`` is missing or fails, syncs each log as before."""
    whole: list[int] = []
    works = [True]
    monkeypatch.setattr(writer_module, "syncfs", lambda fd: whole.append(fd) or works[0])
    store = JsonlStore(store_dir, fsync="batch", batch_interval=2.0)
    ids = [f"agent-{i}" for i in range(writer_module.SYNCFS_AT)]
    for session_id in ids:  # well inside one interval: the syncer's first pass takes them all
        store.create(header(session_id)).append(TURN_START, turn=1)
    asyncio.run(until(lambda: len(whole) == 1, "the sync thread's pass"))
    assert syncs == []  # no log was synced on its own
    writer = store.writer
    writer.sync_files(set(ids[:writer_module.SYNCFS_AT - 1]), True, report=False)  # a small pass: each log
    assert len(whole) == 1 and len(syncs) == writer_module.SYNCFS_AT - 1
    works[0] = False  # syncfs unavailable or failing: the large pass falls back to each log
    writer.sync_files(set(ids), True, report=False)
    assert len(whole) == 2 and len(syncs) == 2 * writer_module.SYNCFS_AT - 1
    store.close()


@pytest.mark.parametrize("fsync", ["batch", "never"])
def test_a_flush_of_many_logs_syncs_the_file_system_first_and_still_reports_each_log(store_dir, fsync,
                                                                                    syncs, monkeypatch):
    whole: list[int] = []
    monkeypatch.setattr(writer_module, "syncfs", lambda fd: whole.append(fd) or True)
    store = JsonlStore(store_dir, fsync=fsync, batch_interval=3600)
    ids = [f"agent-{i}" for i in range(writer_module.SYNCFS_AT)]
    for session_id in ids:
        store.create(header(session_id)).append(TURN_START, turn=1)
    store.flush()
    assert len(whole) == 1 and len(syncs) == len(ids)  # one syncfs, then each log (for its errors)
    for session_id in ids:
        store.open(session_id).append(TURN_START, turn=2)
    real = writer_module.datasync
    broken = os.stat(store_dir / "agent-3.jsonl").st_ino

    def failing(fd: int) -> None:
        if os.fstat(fd).st_ino == broken:
            raise OSError(5, "Input/output error")
        real(fd)

    monkeypatch.setattr(writer_module, "datasync", failing)
    with pytest.raises(StoreError, match=r'cannot sync session log "agent-3" .*Input/output error'):
        store.flush()
    assert len(whole) == 2
    monkeypatch.setattr(writer_module, "datasync", real)
    store.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs is Linux's")
def test_syncfs_is_found_and_syncs_on_linux(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert writer_module.SYNCFS is not None and writer_module.syncfs(fd) is True
    finally:
        os.close(fd)


def test_fsync_never_syncs_only_on_explicit_flush(store_dir, syncs):
    store = JsonlStore(store_dir, fsync="never")
    session = store.create(header("agent-1"))
    session.append(TURN_START, turn=1)
    store.close()
    assert syncs == []
    store = JsonlStore(store_dir, fsync="never")
    store.open("agent-1").append(TURN_START, turn=2)
    store.flush()
    assert len(syncs) == 1
    store.close()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.parametrize("fsync", ["batch", "never"])
def test_descriptors_are_bounded_by_the_lru(store_dir, fsync, syncs):
    before = _open_descriptors()
    store = JsonlStore(store_dir, fsync=fsync, batch_interval=3600, max_open=4)
    sessions = [store.create(header(f"agent-{i}", float(i), "root")) for i in range(40)]
    for turn in range(3):
        for session in sessions:
            session.append(TURN_START, turn=turn)
            assert _open_descriptors() - before <= 4 + 2  # + directory and lock
    store.flush()  # evicted dirty logs are synced through fresh descriptors
    assert len(syncs) == 40
    store.close()
    assert _open_descriptors() == before
    with JsonlStore(store_dir) as again:
        assert [h.id for h in again.children_of("root")] == [f"agent-{i}" for i in range(40)]
        for i in range(40):
            assert [e.turn for e in again.open(f"agent-{i}").events] == [0, 1, 2]


# -- crash safety -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_9_never_loses_an_acknowledged_event(tmp_path):
    store_dir = tmp_path / "store"
    rng = random.Random(20261130)
    acknowledged: dict[int, str] = {}
    created: list[str] = []
    for iteration in range(8):
        proc = subprocess.Popen([sys.executable, str(HERE / "crash_writer.py"), str(store_dir), str(iteration)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=HELPER_ENV)
        start = proc.stdout.readline()
        assert start.startswith("start "), (start, proc.stderr.read() if proc.poll() is not None else "")
        # the restarted writer continues after every acknowledged event
        assert int(start.split()[1]) >= len(acknowledged)
        time.sleep(rng.uniform(0.02, 0.4))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL and err == ""
        for line in out.splitlines():
            word, *rest = line.split()
            if word == "ack":
                # only a torn, unacknowledged seq may be reused by a later writer
                assert int(rest[0]) not in acknowledged, line
                acknowledged[int(rest[0])] = rest[1]
            elif word == "created":
                created.append(rest[0])

        if iteration % 2:
            # a SIGKILL practically never tears a line, a machine crash can: simulate one so the
            # next writer has to repair the tail before it appends
            with (store_dir / "crash-1.jsonl").open("ab") as handle:
                handle.write(b'{"seq":99999,"kind":"user/message","time":1.0,"message":{"role":"us'[:rng.randint(1, 60)])

        store = JsonlStore(store_dir)  # never fails: the killed writer's flock died with it
        session = store.open("crash-1")
        # a kill can also tear a 65 KB write, or land before the writer's first (repairing) append
        assert store.diagnostic("crash-1") in (("torn-tail",) if iteration % 2 else (None, "torn-tail"))
        assert len(session.events) >= len(acknowledged)
        for seq, token in acknowledged.items():
            assert session.events[seq].seq == seq
            assert session.events[seq].message.text.split(" ")[0] == token
        children = [h.id for h in store.children_of("crash-1")]
        assert set(created) <= set(children)
        for child_id in children:
            assert len(store.open(child_id).events) == 5
        assert store.corrupt_ids() == []
        store.close()
    assert len(acknowledged) > 20


# -- the listing index ------------------------------------------------------------------------------------


def _children_with_descriptors(store_dir: Path, count: int) -> None:
    with JsonlStore(store_dir) as store:
        store.create(header("root", 0.5))
        for i in range(count):
            kid = store.create(header(f"agent-{i}", 1.0 + i, "root"), [
                Event(0, DESCRIPTOR, 1.0, None, None, {"version": 2, "mode": "continuable", "provider": "spawn", "label": f"kid {i}"})])
            kid.append(TURN_START, turn=1)
            kid.append(TURN_END, turn=1, data={"reason": "completed"})


def test_reopening_lists_headers_and_descriptors_without_reading_the_logs(store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 5)
    reads = []
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: reads.append(("parse", sid)))
    monkeypatch.setattr(JsonlStore, "_read_head", lambda self, name, sid: reads.append(("header", sid)))
    with JsonlStore(store_dir) as store:
        assert [h.id for h in store.children_of("root")] == [f"agent-{i}" for i in range(5)]
        assert [store.diagnostic(f"agent-{i}") for i in range(5)] == [None] * 5
        assert [store.descriptor(f"agent-{i}")["label"] for i in range(5)] == [f"kid {i}" for i in range(5)]
    assert reads == []


def test_a_log_changed_after_close_is_read_and_checked_again(store_dir):
    _children_with_descriptors(store_dir, 3)
    path = log_path(store_dir, "agent-1")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = b"{not json\n"
    path.write_bytes(b"".join(lines))
    with JsonlStore(store_dir) as store:
        assert [store.diagnostic(f"agent-{i}") for i in range(3)] == [None, "corrupt", None]
    with JsonlStore(store_dir) as store:  # a corrupt log is never vouched for by the index
        assert store.diagnostic("agent-1") == "corrupt"


# -- listing a store the index does not vouch for: heads only, past a budget ----------------------------


def _drop_index(store_dir: Path) -> None:
    (store_dir / ".toh-index.json").unlink()


def _corrupt_line(store_dir: Path, session_id: str, index: int) -> None:
    path = log_path(store_dir, session_id)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[index] = b"{not json\n"
    path.write_bytes(b"".join(lines))


def test_without_an_index_a_listing_past_its_budget_reads_only_each_childs_head(store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 4)
    _drop_index(store_dir)
    _corrupt_line(store_dir, "agent-2", 2)  # mid-file: only a full read can tell
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 0)
    parsed = []
    real_parse = jsonl_module.parse_log
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
    with JsonlStore(store_dir) as store:
        assert [store.listing_diagnostic(f"agent-{i}") for i in range(4)] == [None] * 4
        assert [store.descriptor(f"agent-{i}")["label"] for i in range(4)] == [f"kid {i}" for i in range(4)]
        assert parsed == []  # no transcript was read
        with pytest.raises(StoreError, match='session log "agent-2" is corrupt: line 3: '):
            store.open("agent-2")  # found when its transcript is first loaded ...
        assert store.listing_diagnostic("agent-2") == "corrupt"  # ... and listed from then on
        assert parsed == ["agent-2"]
        assert store.diagnostic("agent-1") is None  # diagnostic() itself still reads in full
        assert parsed == ["agent-2", "agent-1"]


def test_without_an_index_a_listing_checks_logs_in_full_while_its_budget_lasts(store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 3)
    _drop_index(store_dir)
    _corrupt_line(store_dir, "agent-0", 2)
    _corrupt_line(store_dir, "agent-2", 2)
    sizes = [log_path(store_dir, f"agent-{i}").stat().st_size for i in range(2)]
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", sum(sizes))  # the first two logs' worth
    with JsonlStore(store_dir) as store:
        assert [store.listing_diagnostic(f"agent-{i}") for i in range(3)] == ["corrupt", None, None]
        assert store.listing_diagnostic("agent-0") == "corrupt"  # known: costs nothing more
    with JsonlStore(store_dir) as store:  # the next store checks what the last one could not
        assert store.listing_diagnostic("agent-2") == "corrupt"


def test_the_index_keeps_a_peeked_log_as_peeked_and_a_changed_one_is_read_again(store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 2)
    _drop_index(store_dir)
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 0)
    with JsonlStore(store_dir) as store:
        assert store.listing_diagnostic("agent-0") is None
    logs = json.loads((store_dir / ".toh-index.json").read_bytes())["logs"]
    assert logs["agent-0"][3] is False and logs["agent-0"][2]["label"] == "kid 0"  # peeked, said so
    assert "root" not in logs  # not a child: its head was not peeked at, and it was never read
    _corrupt_line(store_dir, "agent-1", 2)  # changed behind the index
    heads = []
    real_head = JsonlStore._read_head  # noqa: SLF001 - counts the scan's reads of log heads: no public face tells them from logs the index vouched for
    monkeypatch.setattr(JsonlStore, "_read_head",
                        lambda self, name, sid: heads.append(sid) or real_head(self, name, sid))
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 1 << 20)
    with JsonlStore(store_dir) as store:
        assert sorted(heads) == ["agent-1", "root"]  # agent-0 came from the index, unread
        assert store.descriptor("agent-0")["label"] == "kid 0"
        assert [store.listing_diagnostic(f"agent-{i}") for i in range(2)] == [None, "corrupt"]
    logs = json.loads((store_dir / ".toh-index.json").read_bytes())["logs"]
    assert logs["agent-0"][3] is True and "agent-1" not in logs  # checked in full now; corrupt: never


@pytest.mark.parametrize("seed_bytes", [0, 10_000, 100_000])
def test_a_childs_descriptor_is_found_after_its_seed(store_dir, monkeypatch, seed_bytes):
    seed = [Event(i, USER_MESSAGE, 1.0, 0, user_message("s" * 1000)) for i in range(seed_bytes // 1000)]
    with JsonlStore(store_dir) as store:
        store.create(header("root", 0.5))
        store.create(header("agent-1", 1.0, "root", seed_length=len(seed)), seed + [
            Event(len(seed), DESCRIPTOR, 1.0, None, None, {"version": 2, "mode": "continuable", "provider": "spawn", "label": "forked"})])
    _drop_index(store_dir)
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 0)
    with JsonlStore(store_dir) as store:
        peeked = store.how_read("agent-1") == "head"
        assert store.descriptor("agent-1")["label"] == "forked"
    # within the peek limit from the head; a seed longer than that: read in full as before
    assert peeked == (seed_bytes < jsonl_module.PEEK_LIMIT)


# -- summaries: what a table of agents needs of a stored log, read once --------------------------------


def test_a_stored_logs_summary_is_read_once_and_again_only_when_the_file_changes(store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 2)
    parsed = []
    real_parse = jsonl_module.parse_log
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
    monkeypatch.setattr(jsonl_module, "RECENT_SESSIONS", 0)  # nothing held: every read would parse again
    with JsonlStore(store_dir) as store:
        first = store.summary("agent-0")
        assert (first.turns, first.last_reason, first.descriptor["label"]) == (1, "completed", "kid 0")
        assert first.header.id == "agent-0" and first.last_time > 1.0
        gc.collect()
        assert store.summary("agent-0") is first and parsed == ["agent-0"]
        with log_path(store_dir, "agent-0").open("ab") as handle:  # changed behind the store's back
            handle.write(b'{"seq":3,"kind":"turn/start","time":9.0,"turn":2}\n')
        again = store.summary("agent-0")
        assert (again.turns, again.last_time) == (2, 9.0) and parsed == ["agent-0", "agent-0"]
        _corrupt_line(store_dir, "agent-1", 2)
        with pytest.raises(StoreError, match='session log "agent-1" is corrupt'):
            store.summary("agent-1")
        with pytest.raises(KeyError):
            store.summary("agent-9")


def test_the_index_keeps_the_summaries_the_store_had_and_the_next_store_reads_no_log_for_them(
        store_dir, monkeypatch):
    _children_with_descriptors(store_dir, 3)
    _drop_index(store_dir)
    with JsonlStore(store_dir) as store:
        expected = {i: store.summary(f"agent-{i}") for i in range(2)}  # agent-2 never summarised
        held = store.open("root")  # a session still held at close is summarised from memory
    logs = json.loads((store_dir / ".toh-index.json").read_bytes())["logs"]
    assert logs["agent-0"][3] is True and logs["agent-0"][4][0] == 1
    assert logs["agent-2"][3] is False  # only its head was read: no summary
    assert logs["root"][4] == [0, 0, 0, None, None] and held is not None
    parsed = []
    real_parse = jsonl_module.parse_log
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
    with JsonlStore(store_dir) as store:
        for i in range(2):
            assert store.summary(f"agent-{i}") == expected[i]
        assert parsed == []
        assert store.summary("agent-2").turns == 1 and parsed == ["agent-2"]
        with log_path(store_dir, "agent-1").open("ab") as handle:  # changed after the index
            handle.write(b'{"seq":3,"kind":"turn/start","time":9.0,"turn":2}\n')
        assert store.summary("agent-1").turns == 2 and parsed == ["agent-2", "agent-1"]


@pytest.mark.parametrize("summary", [[1, 2, 3], "x", [1, "2", 3, None, 1.0], [1, 2, 3, 4, 1.0], [1, 2, 3, None, "t"]])
def test_a_damaged_summary_in_the_index_is_ignored(store_dir, summary):
    _children_with_descriptors(store_dir, 1)
    with JsonlStore(store_dir) as store:
        expected = store.summary("agent-0")
    path = store_dir / ".toh-index.json"
    data = json.loads(path.read_bytes())
    data["logs"]["agent-0"][4] = summary
    path.write_text(json.dumps(data))
    with JsonlStore(store_dir) as store:
        assert store.summary("agent-0") == expected
        assert store.descriptor("agent-0")["label"] == "kid 0" and store.how_read("agent-0") == "full"


def test_a_summary_of_a_session_held_in_memory_follows_its_appends(store_dir):
    with JsonlStore(store_dir) as store:
        session = store.create(header("agent-1", 1.0))
        assert store.summary("agent-1").turns == 0
        session.append(TURN_START, turn=1)
        session.append(TURN_END, turn=1, data={"reason": "completed"})
        assert (store.summary("agent-1").turns, store.summary("agent-1").last_reason) == (1, "completed")


def test_a_descriptor_line_longer_than_the_first_read_is_still_found_and_a_log_without_one_is_read(
        store_dir, monkeypatch):
    with JsonlStore(store_dir) as store:
        store.create(header("root", 0.5))
        store.create(header("agent-1", 1.0, "root"), [
            Event(0, DESCRIPTOR, 1.0, None, None, {"version": 2, "mode": "continuable", "provider": "spawn",
                                                  "label": "l" * 6000})])
        old = store.create(header("agent-2", 2.0, "root"))  # an older version wrote the descriptor later
        old.append(TURN_START, turn=1)
        old.append(DESCRIPTOR, data={"version": 2, "mode": "one-shot", "provider": "spawn", "label": "old"})
    _drop_index(store_dir)
    monkeypatch.setattr(jsonl_module, "LISTING_CHECK_BYTES", 0)
    with JsonlStore(store_dir) as store:
        assert store.how_read("agent-1") == "head" and store.how_read("agent-2") != "head"
        assert store.descriptor("agent-1")["label"] == "l" * 6000
        assert store.descriptor("agent-2")["label"] == "old"  # read in full: it is not in the head
        assert store.listing_diagnostic("agent-2") is None


@pytest.mark.parametrize("content", [b"", b"{torn", b'{"version":1,"logs":[]}', b'{"version":99,"logs":{}}',
                                     b'{"version":1,"logs":{"agent-0":[[1,2,3],{"id":"agent-0"},null]}}'])
def test_a_torn_stale_or_foreign_index_is_ignored(store_dir, content):
    _children_with_descriptors(store_dir, 2)
    (store_dir / ".toh-index.json").write_bytes(content)
    with JsonlStore(store_dir) as store:
        assert [h.id for h in store.children_of("root")] == ["agent-0", "agent-1"]
        assert store.descriptor("agent-0")["label"] == "kid 0"
        assert store.diagnostic("agent-1") is None


def _started_and_killed(store_dir: Path, fsync: str, rng: random.Random) -> tuple[list[str], list[str]]:
    """Run crash_hub.py, SIGKILL it 0-3 ms after reading its n-th line; the ids it acknowledged."""
    proc = subprocess.Popen([sys.executable, str(HERE / "crash_hub.py"), str(store_dir), fsync],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=HELPER_ENV)
    started: list[str] = []
    jobs: list[str] = []
    try:
        for _ in range(rng.randint(1, 4)):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.poll() is not None else "no output"
            word, child_id = line.split()
            (started if word == "started" else jobs).append(child_id)
        time.sleep(rng.uniform(0, 0.003))
    finally:
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    for line in out.splitlines():  # printed before the kill landed: acknowledged too
        word, child_id = line.split()
        (started if word == "started" else jobs).append(child_id)
    return started, jobs


@pytest.mark.slow
@pytest.mark.parametrize("fsync", ["always", "batch"])
def test_a_child_whose_start_returned_survives_a_kill_right_after_and_resumes(tmp_path, fsync):
    """Issue 26.2: ``hub.start`` (and a background ``spawn``) return only once the child's header and
    descriptor are written (fsynced under "always"): killed 0-3 ms after printing the id, the child is
    listed on reopen and resumes from its log."""
    import toh_nb as tn

    rng = random.Random(f"26.2 {fsync}")
    for iteration in range(20):
        store_dir = tmp_path / f"{fsync}-{iteration}"
        started, jobs = _started_and_killed(store_dir, fsync, rng)
        assert started

        async def reopened() -> tuple[str, str, list[str]]:
            async with tn.AsyncHub(tn.FunctionModel(lambda request: "resumed"), store=str(store_dir)) as hub:
                listing = str(await hub.list_agents())
                kid = await hub.child(started[-1])
                await hub.send(kid, "go on")
                closing = await kid.wait(timeout=30)
                prompts = {child_id: [row["text"] for row in await hub.transcript(child_id, raw=True)
                                      if row["kind"] in ("message/queued", "user/message")]
                           for child_id in started}
                return listing, closing, [h.id for h in engine_of(hub).store.headers()], prompts

        listing, closing, stored, prompts = asyncio.run(reopened())
        for number, child_id in enumerate(started, 1):
            assert f"{child_id} [ready] \u2014 kid " in listing, (iteration, child_id, listing)
            label = listing.split(f"{child_id} [ready] \u2014 ", 1)[1].split("\n", 1)[0]
            # the first prompt was acknowledged with the start: it is in the log, run or pending
            assert f"task {label.split()[1]}" in prompts[child_id], (iteration, child_id, prompts[child_id])
        # the resumed child ran its pending first prompt (if its turn had not logged it) before "go on"
        assert prompts[started[-1]][-1] == "go on"
        assert closing == "resumed"
        assert set(jobs) <= set(stored), (iteration, jobs, stored)


# -- issue 26.4: one writer, even when .lock is deleted --------------------------------------------------

_HOLDER = textwrap.dedent("""
    import sys
    from toh_nb.core.content import user_message
    from toh_nb.core.session import USER_MESSAGE, SessionHeader
    from toh_nb.store.jsonl import JsonlStore
    store = JsonlStore(sys.argv[1])
    session = store.open("agent-1") if "agent-1" in store else store.create(SessionHeader("agent-1", 1.0, origin="root"))
    print("ready", flush=True)
    for line in sys.stdin:
        session.append(USER_MESSAGE, turn=1, message=user_message(line.strip()))
        print("ok", flush=True)
    store.close()
""")


def test_deleting_the_lock_file_lets_no_second_process_write_the_store(store_dir):
    """Issue 26.4: the exclusion is flock on the store directory itself; ``rm .lock`` (a ``git clean``)
    lets no second writer in, from another process or from this one."""
    first = subprocess.Popen([sys.executable, "-c", _HOLDER, str(store_dir)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline() == "ready\n"
        (store_dir / ".lock").unlink()
        second = subprocess.run([sys.executable, "-c", _HOLDER, str(store_dir)], input="intruder\n",
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and second.stdout == ""
        assert second.stderr.strip().splitlines()[-1] == (
            f"toh_nb.core.errors.StoreError: store directory {store_dir} is in use by another hub (pid unknown); "
            f"open it read-only with JsonlStore({str(store_dir)!r}, read_only=True) or close the other hub")
        assert not (store_dir / ".lock").exists()  # the refused process created nothing
        with pytest.raises(StoreError, match=r"is in use by another hub \(pid unknown\)"):
            JsonlStore(store_dir)
        first.stdin.write("mine\n")
        first.stdin.flush()
        assert first.stdout.readline() == "ok\n"
    finally:
        first.stdin.close()
        first.wait(timeout=30)
    with JsonlStore(store_dir) as store:  # released with the holder: one writer's lines, in order
        assert [e.message.text for e in store.open("agent-1").events] == ["mine"]
        assert store.diagnostic("agent-1") is None


def test_a_second_store_object_on_a_directory_whose_lock_file_was_removed_is_refused(store_dir):
    with JsonlStore(store_dir):
        (store_dir / ".lock").unlink()
        with pytest.raises(StoreError, match=r"is in use by another hub \(pid unknown\)"):
            JsonlStore(store_dir)
    with JsonlStore(store_dir) as successor:  # closing released the directory
        assert (store_dir / ".lock").read_text() == f"{os.getpid()}\n"
        assert not successor.closed


@pytest.mark.parametrize("position", ["middle", "last"])
def test_a_seq_that_does_not_increase_makes_the_log_corrupt(store_dir, position):
    """Two writers (or lines moved around) leave duplicate or decreasing seqs: the reader names the line."""
    _three_events(store_dir)
    path = log_path(store_dir, "agent-1")
    lines = path.read_bytes().splitlines(keepends=True)
    intruder = b'{"seq":1,"kind":"turn/start","time":2.0,"turn":1}\n'
    lines.insert(3 if position == "middle" else len(lines), intruder)
    path.write_bytes(b"".join(lines))
    store = JsonlStore(store_dir)
    line = 4 if position == "middle" else 5
    follows = 1 if position == "middle" else 2
    problem = f"line {line}: seq 1 does not follow seq {follows} (seq must increase line by line)"
    assert (store.diagnostic("agent-1"), store.problem("agent-1")) == ("corrupt", problem)
    with pytest.raises(StoreError) as caught:
        store.open("agent-1")
    assert str(caught.value) == f'session log "agent-1" is corrupt: {problem}'
    store.close()
    assert path.read_bytes() == b"".join(lines)  # never "repaired" away


# -- issue 26.3: every stored record is checked for its shape ---------------------------------------------


@pytest.mark.parametrize("position", ["middle", "last"])
@pytest.mark.parametrize("field, value, problem", [
    ("message", 5, "message: expected an object, got an integer (5)"),
    ("seq", "2", "seq: expected an integer >= 0, got a string ('2')"),
    ("turn", True, "turn: expected an integer >= 0 or null, got a boolean (True)"),
    ("message", {"role": "user", "content": "hello"}, "message.content: expected an array of blocks, got a string ('hello')"),
    ("message", {"role": "user", "content": [{"type": "text", "text": 1}]},
     "message.content[0].text: expected a string, got an integer (1)"),
])
def test_an_event_line_of_the_wrong_shape_makes_only_its_log_corrupt(store_dir, position, field, value, problem):
    _three_events(store_dir, "agent-1")
    other = _three_events(store_dir, "agent-2")
    path = log_path(store_dir, "agent-1")
    lines = path.read_bytes().splitlines(keepends=True)
    index = 2 if position == "middle" else 3  # the user message, or the last line (turn/end)
    record = json.loads(lines[index])
    record[field] = value
    lines[index] = json.dumps(record).encode() + b"\n"
    path.write_bytes(b"".join(lines))

    store = JsonlStore(store_dir)
    expected = f"line {index + 1}: {problem}"
    assert (store.diagnostic("agent-1"), store.problem("agent-1")) == ("corrupt", expected)
    with pytest.raises(StoreError) as caught:
        store.open("agent-1")
    assert str(caught.value) == f'session log "agent-1" is corrupt: {expected}'
    assert as_json(store.open("agent-2").events) == other
    store.close()


@pytest.mark.parametrize("change, problem", [
    ({"delegation_depth": "1"}, "line 1: invalid header (header delegation_depth: expected an integer >= 0, "
                                "got a string ('1'))"),
    ({"created": None}, "line 1: invalid header (header created: expected a number (seconds since the epoch), "
                        "got null)"),
    ({"parent_session": "../x"}, "line 1: invalid header (header parent_session: expected a session id, "
                                 "got a string ('../x'))"),
    ({"seed_length": -1}, "line 1: invalid header (header seed_length: expected an integer >= 0, got an "
                          "integer (-1))"),
])
def test_a_header_of_the_wrong_shape_is_reported_by_id(store_dir, change, problem):
    _three_events(store_dir, "agent-1")
    path = log_path(store_dir, "agent-1")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0] = json.dumps({**json.loads(lines[0]), **change}).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    with JsonlStore(store_dir) as store:
        assert store.corrupt_ids() == ["agent-1"]
        assert store.problem("agent-1") == problem
        with pytest.raises(StoreError, match='session log "agent-1" is corrupt: line 1: invalid header'):
            store.open("agent-1")


def test_a_store_path_that_is_a_file_is_named(tmp_path):
    """Issue 26.14: a clear StoreError naming the path, not ``[Errno 17] File exists``."""
    path = tmp_path / "runs"
    path.write_text("not a directory")
    for make in (lambda: JsonlStore(path), lambda: JsonlStore(path, read_only=True)):
        with pytest.raises(StoreError) as caught:
            make()
        assert str(caught.value) == f"store path {path} is not a directory"
    with pytest.raises(StoreError) as caught:
        JsonlStore(path / "inner")
    assert str(caught.value) == f"store path {path / 'inner'} is not a directory (a parent of it is a file)"
    assert path.read_text() == "not a directory"


def test_the_last_turns_diagnostic_is_summarised_and_kept_in_the_index(store_dir, monkeypatch):
    with JsonlStore(store_dir) as store:
        store.create(header("root", 0.5))
        failed = store.create(header("agent-1", 1.0, "root"))
        failed.append(TURN_START, turn=1)
        failed.append(TURN_END, turn=1, data={"reason": "error", "error": "the first failure"})
        failed.append(TURN_START, turn=2)
        failed.append(TURN_END, turn=2, data={"reason": "error", "error": "RuntimeError: no source"})
        stopped = store.create(header("agent-2", 1.0, "root"))
        stopped.append(TURN_START, turn=1)
        stopped.append(TURN_END, turn=1, data={"reason": "aborted", "cause": "parent"})
        healed = store.create(header("agent-3", 1.0, "root"))
        healed.append(TURN_START, turn=1)
        healed.append(TURN_END, turn=1, data={"reason": "error", "error": "boom"})
        healed.append(TURN_START, turn=2)
        healed.append(TURN_END, turn=2, data={"reason": "completed"})
        expected = {i: store.summary(f"agent-{i}") for i in (1, 2, 3)}
    assert [expected[i].last_error for i in (1, 2, 3)] == [
        "RuntimeError: no source", "stopped by parent", None]
    logs = json.loads((store_dir / ".toh-index.json").read_bytes())["logs"]
    # the seventh element only when there is a diagnostic; the sixth (denied) is then present, perhaps empty
    assert logs["agent-1"][4][5:] == [[], "RuntimeError: no source"] and len(logs["agent-3"][4]) == 5
    parsed = []
    real_parse = jsonl_module.parse_log
    monkeypatch.setattr(jsonl_module, "parse_log", lambda data, sid: parsed.append(sid) or real_parse(data, sid))
    with JsonlStore(store_dir) as store:
        assert {i: store.summary(f"agent-{i}") for i in (1, 2, 3)} == expected and parsed == []


@pytest.mark.parametrize("summary", [[1, 2, 3, None, 1.0, [], 5], [1, 2, 3, None, 1.0, "x", "e"],
                                     [1, 2, 3, None, 1.0, [], "e", "more"]])
def test_a_damaged_diagnostic_in_the_index_is_ignored(store_dir, summary):
    test_a_damaged_summary_in_the_index_is_ignored(store_dir, summary)


def test_an_empty_directory_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for directory in ("", b""):
        with pytest.raises(UsageError) as caught:
            JsonlStore(directory)
        assert str(caught.value) == 'JsonlStore directory is an empty path; pass a directory, or "." for the current one'
    assert list(tmp_path.iterdir()) == []
