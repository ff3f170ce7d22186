"""Issue 26.2 for ``send``: a follow-up whose id ``send`` returned survives a process kill right after.

Each test runs ``crash_send.py`` in its own process (the package under test on its path), kills it
(SIGKILL, or ``os._exit`` right after the last ``send`` returned) and reopens the store: every message
id that was printed is in the child's log as ``message/queued``; the next ``send`` runs the pending
ones first, in the order they were sent, then its own; a message a turn had already consumed is never
delivered again.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import toh_nb as tn

from .test_jsonl import HELPER_ENV

HERE = Path(__file__).resolve().parent


def _helper(store_dir: Path, fsync: str, scenario: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE / "crash_send.py"), str(store_dir), fsync, scenario],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=HELPER_ENV)


def _log(store_dir: Path, child_id: str) -> list[dict]:
    """The child's events as written (a torn last line, which a kill can leave, is skipped)."""
    events = []
    for line in (store_dir / f"{child_id}.jsonl").read_bytes().splitlines()[1:]:
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


def _queued(events: list[dict]) -> list[str]:
    return [e["data"]["id"] for e in events if e["kind"] == "message/queued"]


def _consumed(events: list[dict]) -> list[str]:
    return [e["message"].get("id") for e in events if e["kind"] == "user/message"]


def _resume(store_dir: Path, child_id: str, text: str) -> list[dict]:
    """Reopen the store with a model that answers at once, send ``text`` to the child, wait until
    it settled; the log's events that the reopened hub wrote, and the new message's id."""
    before = len(_log(store_dir, child_id))

    async def main() -> str:
        async with tn.AsyncHub(tn.FunctionModel(lambda request: f"did {request.last_user_text}"),
                               store=str(store_dir)) as hub:
            kid = await hub.child(child_id)
            message_id = await hub.send(kid, text)
            await kid.wait(timeout=60)
            return message_id

    message_id = asyncio.run(main())
    return _log(store_dir, child_id)[before:], message_id


def _sent_and_killed(store_dir: Path, fsync: str, rng: random.Random) -> tuple[str, list[str]]:
    proc = _helper(store_dir, fsync, "loop")
    sent: list[str] = []
    try:
        line = proc.stdout.readline()
        assert line.startswith("child "), proc.stderr.read() if proc.poll() is not None else line
        child_id = line.split()[1]
        for _ in range(rng.randint(1, 6)):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.poll() is not None else "no output"
            sent.append(line.split()[1])
        time.sleep(rng.uniform(0, 0.003))
    finally:
        proc.send_signal(signal.SIGKILL)
        # read through the pipe's reader (communicate() would skip what readline() already buffered)
        out, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL and err == "", err
    sent += [line.split()[1] for line in out.splitlines()]  # printed before the kill landed: acknowledged too
    return child_id, sent


@pytest.mark.slow
@pytest.mark.parametrize("fsync", ["always", "batch"])
def test_a_follow_up_whose_send_returned_survives_a_kill_right_after_and_runs_in_order_on_resume(tmp_path, fsync):
    rng = random.Random(f"26.2 send {fsync}")
    for iteration in range(20):
        store_dir = tmp_path / f"{fsync}-{iteration}"
        child_id, sent = _sent_and_killed(store_dir, fsync, rng)
        crashed = _log(store_dir, child_id)
        queued = _queued(crashed)
        # the start's first prompt is queued first (acknowledged by the start), then every acknowledged
        # follow-up, in the order the sends returned
        assert queued[1:len(sent) + 1] == sent, (iteration, sent, queued)
        consumed = set(_consumed(crashed))
        pending = [message_id for message_id in queued if message_id not in consumed]
        texts = {e["data"]["id"]: e["data"]["content"] for e in crashed if e["kind"] == "message/queued"}

        written, new_id = _resume(store_dir, child_id, "after the crash")
        ran = [e["message"] for e in written if e["kind"] == "user/message"]
        # the pending follow-ups run first, oldest first, each once, with their text; then the new message
        assert [m["id"] for m in ran] == pending + [new_id], (iteration, sent, pending)
        assert [m["content"][0]["text"] for m in ran] == [texts[i] for i in pending] + ["after the crash"]
        final = _consumed(_log(store_dir, child_id))
        assert all(final.count(message_id) == 1 for message_id in queued), (iteration, final)


def _scenario(store_dir: Path, scenario: str, fsync: str = "batch") -> tuple[str, list[str]]:
    proc = _helper(store_dir, fsync, scenario)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == "", err
    lines = out.splitlines()
    return lines[0].split()[1], lines[1].split()[1:]


@pytest.mark.slow
def test_follow_ups_parked_by_an_interrupt_survive_a_crash_and_run_before_the_next_send(tmp_path):
    child_id, (b, c) = _scenario(tmp_path, "parked")
    crashed = _log(tmp_path, child_id)
    opening, *follow_ups = _queued(crashed)  # the start's first prompt, run by the first turn
    assert opening in _consumed(crashed)
    assert follow_ups == [b, c] and b not in _consumed(crashed) and c not in _consumed(crashed)
    written, d = _resume(tmp_path, child_id, "D")
    assert [(e["message"]["id"], e["message"]["content"][0]["text"]) for e in written if e["kind"] == "user/message"] \
        == [(b, "block B"), (c, "block C"), (d, "D")]
    assert [e["data"]["reason"] for e in written if e["kind"] == "turn/end"] == ["completed"] * 3


@pytest.mark.slow
def test_a_follow_up_whose_turn_had_started_is_not_delivered_again_after_a_crash(tmp_path):
    child_id, (b, c, d, e) = _scenario(tmp_path, "consumed")
    written, f = _resume(tmp_path, child_id, "F")
    # B's turn was open at the crash: it is closed "interrupted" and B never runs again
    assert [(x["turn"], x["data"]["reason"]) for x in written if x["kind"] == "turn/end"][0] == (2, "interrupted")
    assert [x["message"]["id"] for x in written if x["kind"] == "user/message"] == [c, d, e, f]
    assert _consumed(_log(tmp_path, child_id)).count(b) == 1


@pytest.mark.parametrize("fsync", ["batch", "always"])
def test_follow_ups_a_kill_dropped_never_run_after_a_crash_right_after_it(tmp_path, fsync):
    """Issue 41.2: a kill is acknowledged when its ``message/discarded`` record is, like a send: a
    process that dies microseconds after ``kill`` returned never runs the killed follow-ups again."""
    for trial in range(3):
        store_dir = tmp_path / str(trial)
        child_id, (b, c) = _scenario(store_dir, "killed", fsync)
        crashed = _log(store_dir, child_id)
        assert [e["data"]["ids"] for e in crashed if e["kind"] == "message/discarded"] == [[b, c]]
        written, d = _resume(store_dir, child_id, "D")
        assert [x["message"]["id"] for x in written if x["kind"] == "user/message"] == [d], trial
