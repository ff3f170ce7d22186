"""The status and stop-reason vocabularies, as ``StrEnum``s.

Their values are the reference's texts (``"completed"``, ``"max-tokens"``, ``"running"`` …), and a
``StrEnum`` member *is* that string, so logs, tables, JSON and comparisons with plain strings keep
working; code gets one place that lists every value and an editor that completes them.
"""

from __future__ import annotations

from enum import StrEnum


class _Vocabulary(StrEnum):
    """Shown exactly as the plain string it equals (stored notebook outputs, reprs of tuples)."""

    def __repr__(self) -> str:
        return repr(self.value)


class TurnEnd(_Vocabulary):
    """Why a turn ended (the ``turn/end`` record of a session log)."""

    COMPLETED = "completed"
    MAX_TOKENS = "max-tokens"
    ABORTED = "aborted"
    INTERRUPTED = "interrupted"  # closed by crash repair after a restart
    ERROR = "error"
    BLOCKED = "blocked"  # the model refused
    MAX_STEPS = "max-steps"
    TOKEN_BUDGET = "token-budget"
    MAX_TIME = "max-time"


class StopReason(_Vocabulary):
    """How a run or an activation ended (``RunResult.stop_reason``, notices, ``subagent/end``).

    Its values: ``completed``, ``aborted`` (stopped: interrupted, killed, cancelled), ``error``,
    ``max-tokens``, ``refusal`` (the model refused), ``max-steps``, ``token-budget`` and ``max-time`` (the
    three budgets), as the members ``StopReason.COMPLETED`` … ``StopReason.MAX_TIME``. A member *is* its
    text (``StopReason.MAX_TOKENS == "max-tokens"``), so a stop reason compares with, prints as and is
    stored as the plain string; ``StopReason("max-tokens")`` finds a member by its text (it makes none).

    Raises:
        ValueError: ``StopReason(text)`` of a text that is no member's (``'x' is not a valid StopReason``).
    """

    COMPLETED = "completed"
    ABORTED = "aborted"
    ERROR = "error"
    MAX_TOKENS = "max-tokens"
    REFUSAL = "refusal"
    MAX_STEPS = "max-steps"
    TOKEN_BUDGET = "token-budget"
    MAX_TIME = "max-time"


class AgentStatus(_Vocabulary):
    """A continuable child as ``list_agents`` shows it."""

    RUNNING = "running"
    IDLE = "idle"
    READY = "ready"


class JobStatus(_Vocabulary):
    """A background job's state."""

    RUNNING = "running"
    STOPPING = "stopping"
    COMPLETED = "completed"
    KILLED = "killed"
    FAILED = "failed"


#: a budget stop keeps its own name from the turn to the run (``toh_nb.core.budget``)
BUDGET_STOPS = {TurnEnd.MAX_STEPS: StopReason.MAX_STEPS, TurnEnd.TOKEN_BUDGET: StopReason.TOKEN_BUDGET,
                TurnEnd.MAX_TIME: StopReason.MAX_TIME}
#: a one-shot run's stop reason from its turn's end (``error``, ``interrupted`` or unknown: ``error``)
ONE_SHOT_STOP = {TurnEnd.COMPLETED: StopReason.COMPLETED, TurnEnd.MAX_TOKENS: StopReason.MAX_TOKENS,
                 TurnEnd.ABORTED: StopReason.ABORTED, TurnEnd.BLOCKED: StopReason.REFUSAL, **BUDGET_STOPS}
#: a continuable epoch's (and a root turn's) stop reason: an interrupted turn was stopped
EPOCH_STOP = {**ONE_SHOT_STOP, TurnEnd.INTERRUPTED: StopReason.ABORTED, TurnEnd.ERROR: StopReason.ERROR}
