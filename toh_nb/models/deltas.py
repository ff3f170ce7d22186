"""Where a streaming model sends each piece of text as it arrives.

Two listeners, one call: the user's own ``on_delta(agent_id, text)`` (sync or async, given to the model)
and the hub's event stream (``ModelRequest.on_delta``, set by the agent while someone listens; it becomes
a ``TextDelta`` event). A display that fails must never break the model call, so a failing callback is
logged once per model and otherwise ignored.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable

from ..core.model import ModelRequest

log = logging.getLogger("toh_nb")


class DeltaSink:
    """One per model: remembers whether its callback's failure was already logged."""

    __slots__ = ("owner", "_warned")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._warned = False

    @staticmethod
    def wanted(request: ModelRequest, callback: Callable[..., Any] | None) -> bool:
        """Someone listens to this request's text pieces (so a model should stream them)."""
        return callback is not None or request.on_delta is not None

    async def emit(self, request: ModelRequest, piece: str, callback: Callable[..., Any] | None) -> None:
        if request.on_delta is not None:
            request.on_delta(piece)  # the hub's stream: publishing never raises (listeners are contained)
        if callback is None:
            return
        try:
            result = callback(request.agent_id, piece)
            if inspect.isawaitable(result):
                await result
        except Exception:  # a broken display must not break the model call
            if not self._warned:
                self._warned = True
                log.warning("%s on_delta callback failed; further failures are not logged", self.owner,
                            exc_info=True)
