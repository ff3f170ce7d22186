"""ACP stop reasons → toh_nb turn endings (the reference's map, harness spec §12).

``end_turn`` → completed; ``max_tokens`` → max-tokens; ``refusal`` → the refusal ending; ``cancelled``
→ aborted (a cancellation we asked for arrives as the turn's own cancellation, so only an agent that
cancels on its own reaches this map, and that is reported as a failure naming it);
``max_turn_requests`` and anything unknown → error, with a diagnostic naming the reason.
"""

from __future__ import annotations

from ...core.errors import ModelError
from ...core.model import ModelResponse

#: ACP stop reasons a turn can end with, and the model stop reason each becomes
MODEL_STOPS = {"end_turn": "end_turn", "max_tokens": "max_tokens", "refusal": "refusal"}


def response_for(stop_reason: str, text: str, command: str) -> ModelResponse:
    """The model response of one ``session/prompt``; raises ``ModelError`` (the turn ends ``error``)."""
    mapped = MODEL_STOPS.get(stop_reason)
    if mapped is not None:
        return ModelResponse(text=text, stop_reason=mapped)
    if stop_reason == "max_turn_requests":
        raise ModelError(f"ACP agent `{command}` stopped at its own limit of model requests for one turn "
                         "(stopReason max_turn_requests)")
    if stop_reason == "cancelled":
        raise ModelError(f"ACP agent `{command}` cancelled the turn on its own (stopReason cancelled)")
    raise ModelError(f"ACP agent `{command}` ended the turn with an unknown stop reason {stop_reason!r}")
