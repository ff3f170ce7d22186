"""Budgets: limits that stop a runaway turn before it costs money.

A model that keeps calling tools never ends its turn on its own (seen against a local server: 247
requests in 30 s). Three limits, set once on the hub (defaults for every agent) and per child:

- ``max_steps``: model calls in one turn (default :data:`DEFAULT_MAX_STEPS`). The call that would
  exceed it is not made; the turn ends ``max-steps``.
- ``token_budget``: input + output tokens an agent *and its descendants* may use (a child's tokens
  count against every ancestor's budget). Checked before each model call: once the agent's own budget,
  or an ancestor's, is spent, the turn that wants another call ends ``token-budget``. The step whose
  response crossed the line still runs its tool calls, so the conversation stays valid.
  ``Hub(token_budget=...)`` is the root's budget, which bounds the whole tree.
- ``turn_timeout``: wall-clock seconds per turn; the turn is cancelled like an interrupt and ends
  ``max-time`` (queued messages still run afterwards, unlike an interrupt, which parks them).

Each stop has its own stop reason and a diagnostic naming the limit, so a parent reads it like any other
failure (``Error: subagent run hit its step limit before finishing\\nDiagnostic: …``).

Budgets are per activation: a continuable child keeps its own settings across resumes within one
process, and gets the hub's defaults after a restart (like ``max_tokens``, they are not in the
descriptor, whose fields the reference fixes). Token counts start from the agent's own logged usage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .checks import check_count, check_seconds
from .states import TurnEnd

DEFAULT_MAX_STEPS = 50

MAX_STEPS = TurnEnd.MAX_STEPS
TOKEN_BUDGET = TurnEnd.TOKEN_BUDGET
MAX_TIME = TurnEnd.MAX_TIME
#: cancellation cause of a turn stopped by its wall-clock budget
TIME_CAUSE = "time-limit"


@dataclass(frozen=True, slots=True)
class Limits:
    """The budgets of one agent. ``None`` means no limit."""

    max_steps: int | None = DEFAULT_MAX_STEPS
    token_budget: int | None = None
    turn_timeout: float | None = None

    @classmethod
    def checked(cls, max_steps: Any = DEFAULT_MAX_STEPS, token_budget: Any = None,
                turn_timeout: Any = None) -> "Limits":
        """Validated limits (``UsageError`` naming the bad parameter); ``None`` means no limit."""
        return cls(check_max_steps(max_steps), check_token_budget(token_budget), check_turn_timeout(turn_timeout))

    def for_child(self, max_steps: Any = None, token_budget: Any = None, turn_timeout: Any = None) -> "Limits | None":
        """A child's limits: the given ones over these defaults (``None`` = the default; a child's token
        budget is its own, never inherited: its ancestors' budgets already cover it). ``None`` when the
        child just takes the defaults (no object per child)."""
        max_steps = check_max_steps(max_steps)
        token_budget = check_token_budget(token_budget)
        turn_timeout = check_turn_timeout(turn_timeout)
        if max_steps is None and token_budget is None and turn_timeout is None:
            return None
        return Limits(max_steps if max_steps is not None else self.max_steps, token_budget,
                      turn_timeout if turn_timeout is not None else self.turn_timeout)


def check_max_steps(value: Any, name: str = "max_steps") -> int | None:
    return check_count(value, name, none="no limit")


def check_token_budget(value: Any, name: str = "token_budget") -> int | None:
    return check_count(value, name, note="tokens", none="no budget")


def check_turn_timeout(value: Any, name: str = "turn_timeout") -> float | None:
    return check_seconds(value, name, positive=True)


def step_limit_text(max_steps: int) -> str:
    return f"the turn reached its step limit of {max_steps} model calls (max_steps={max_steps})"


def token_budget_text(agent_id: str, owner_id: str, used: int, budget: int) -> str:
    whose = "its token budget" if owner_id == agent_id else f"the token budget of its ancestor {owner_id}"
    return f"{whose} is spent: {used} of {budget} tokens used (token_budget={budget})"


def time_limit_text(turn_timeout: float) -> str:
    return f"the turn ran out of its time limit of {turn_timeout:g} s (turn_timeout={turn_timeout:g})"
