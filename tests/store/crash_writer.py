"""Helper process for the JSONL crash test (not a test module).

``python crash_writer.py <store-dir> <seed>`` opens a ``JsonlStore(fsync="always")`` on the directory,
opens (or creates) the session ``crash-1`` and appends user messages forever. After each append
*returns* it prints ``ack <seq> <token>`` (flushed), so every printed line is an acknowledged event;
every 20 appends it also creates a child log (with a seed copied from ``crash-1``) and prints
``created <id>`` once ``create`` returned. The test kills it with SIGKILL at random moments.
"""

from __future__ import annotations

import os
import random
import sys
import time

from toh_nb.core.content import Source, user_message
from toh_nb.core.session import USER_MESSAGE, SessionHeader
from toh_nb.store.jsonl import JsonlStore


def main() -> None:
    directory, seed = sys.argv[1], int(sys.argv[2])
    rng = random.Random(seed)
    store = JsonlStore(directory, fsync="always")
    try:
        session = store.open("crash-1")
    except KeyError:
        session = store.create(SessionHeader("crash-1", time.time(), origin="root"))
    print(f"start {len(session.events)}", flush=True)
    pid = os.getpid()
    count = 0
    while True:
        token = f"{pid}-{count}"
        # sizes up to ~64 KB make a kill in the middle of a write() possible
        body = token + " " + "x" * rng.choice((0, 10, 500, 5000, 65000))
        event = session.append(USER_MESSAGE, turn=1, message=user_message(body, source=Source("user")))
        print(f"ack {event.seq} {token}", flush=True)
        count += 1
        if count % 20 == 0:
            child_id = f"child-{pid}-{count}"
            header = SessionHeader(child_id, time.time(), parent_session="crash-1", origin="subagent",
                                   delegation_depth=1, seed_length=min(5, len(session.events)))
            store.create(header, session.events[:header.seed_length])
            print(f"created {child_id}", flush=True)


if __name__ == "__main__":
    main()
