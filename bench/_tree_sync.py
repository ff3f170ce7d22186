"""What the tree benches share: a stand-in for the widget comm's ``send`` that counts what would reach the
page, and a wait until the tree has nothing left to send (``bench/tree_updates.py``, ``bench/waterfall.py``)."""

from __future__ import annotations

import json
import time


class Recorder:
    """Stands in for the widget comm's ``send``: counts what would go to the page."""

    def __init__(self) -> None:
        self.bytes = 0
        self.messages = 0

    def __call__(self, data=None, metadata=None, buffers=None, **_: object) -> None:
        self.bytes += len(json.dumps(data, default=str, separators=(",", ":")))
        self.bytes += sum(len(memoryview(b)) for b in buffers or ())
        self.messages += 1

    def take(self) -> tuple[int, int]:
        out = (self.bytes, self.messages)
        self.bytes = self.messages = 0
        return out


def quiet(tree, hub, seconds: float = 0.6) -> None:
    """Wait until ``seconds`` passed, no refresh is pending and none is running (coalesced refreshes have
    flushed). A refresh runs on the hub's loop and is no longer "pending" while it runs, so each look first
    waits for the loop to be free (a no-op call). A costly refresh spaces the next one (``LOOP_SHARE``: a
    0.5 s refresh makes the next wait 10 s), so this waits up to a minute; a refresh still pending then
    is an error, not a zero."""
    time.sleep(seconds)
    deadline = time.monotonic() + 60
    while True:
        hub.portal.call(lambda: None)  # a refresh running on the loop has finished (and sent what it sends)
        if not tree.refresh_pending:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the tree still has a refresh pending after 60 s")
        time.sleep(0.05)
    time.sleep(0.2)
    hub.portal.call(lambda: None)
