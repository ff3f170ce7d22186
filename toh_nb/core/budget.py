"""Budgets: limits that stop a runaway turn before it costs money.

A model that keeps calling tools never ends its turn on its own (seen against a local server: 247
requests in 30 s). Three limits, set once on the hub (defaults for every agent) and per child:

- ``max_steps``: model calls in one turn (default :data:`DEFAULT_MAX_STEPS`). The call that would
  exceed it is not made; the turn ends ``max-steps``.
- ``token_budget``: input + output tokens an agent *and its descendants* may use (a child's tokens
  count against every ancestor's budget). ``Hub(token_budget=...)`` is the root's budget, which bounds
  the whole tree. Enforced by *reservations* (below): once the agent's own budget, or an ancestor's, is
  spent, the turn that wants another call ends ``token-budget``. The step whose response crossed the
  line still runs its tool calls, so the conversation stays valid.
- ``turn_timeout``: wall-clock seconds per turn; the turn is cancelled like an interrupt and ends
  ``max-time`` (queued messages still run afterwards, unlike an interrupt, which parks them).

Reservations, and the guarantee they give. Checking "is the budget spent?" before each call is not
enough under fan-out: fifty children that all see 0 of 1,000 used all call at once (10,020 tokens seen).
So every model call first *reserves* its estimated size on each budget of its path, all or nothing and
with no await between the check and the reservation, and settles after the call: the reservation is
released and the tokens the response reports are charged (the reported figure, even when a server
ignored ``max_tokens``). A call that fails or is cancelled releases its reservation and charges nothing.
For each budget on its path, in order from the agent up:

- spent (settled tokens >= the budget): the call is not made; the turn ends ``token-budget`` with that
  budget's diagnostic (:func:`token_budget_text`; the first spent budget, the agent's own first);
- no room (settled + reserved tokens >= the budget, reservations in flight): the call waits until a
  call in flight settles, then looks again (an interrupt or ``turn_timeout`` ends the wait);
- otherwise the call reserves ``R`` = prompt estimate + output bound on every budget of its path.

The *output bound* is the effective ``max_tokens``: the agent's (the child's own, else its parent's,
else the hub's), else the model's own default declared as an integer attribute ``max_tokens``
(``OpenAIChatModel``, ``LocalModel``). Unknown (``None``), the call reserves all the room left on
its tightest budget, so calls sharing that budget run one at a time: set ``max_tokens`` to let them
run together. The *prompt estimate* (:func:`prompt_estimate`) is the previous call's reported size
(its input + output tokens, from the last assistant message) plus the messages added since, at
:data:`CHARS_PER_TOKEN` characters a token; before the agent's first response, the system prompt, the
tool schemas and every message, at that rate.

Guarantee, for each budget ``B``: a call is admitted only while the settled + reserved tokens are
below ``B``, and adds its ``R``; settling replaces ``R`` by the tokens reported. So the tokens used
never exceed ``B - 1 + R`` of the last call admitted, plus what the calls in flight at that moment
used beyond their own ``R`` (a prompt larger than estimated, a server that ignores ``max_tokens``, an
unbounded call that used more than the room it reserved). With estimates that hold, the overshoot is
less than one call's reservation however many children call at once; an agent calling alone
overshoots as before, by at most the call that crossed the line.

A reservation lasts one model call (not its tools), so a parent waiting for its children holds none,
and a waiting call only waits for model calls already running. Where the calls run:

- children whose steps run elsewhere (a provider's StepLoop, ``toh_nb.core.steps``; Ray's): the budgets
  stay in the driver's tree; before each model call a budgeted child's loop asks the driver
  (``TurnContext.allowance``), which reserves with this code and settles when it replays the response
  (one round trip per model call, only for children with a budget on their path);
- ACP children: their tokens are the external agent's own and ACP does not report them (0 is logged),
  so their prompts reserve nothing (a model with ``reports_usage = False``); a spent budget on their
  path still stops their next prompt.

``tokens_left`` in ``hub.agents()`` and the tree is the budget minus the settled tokens: reservations
in flight are not subtracted (they last one call, and the logs the tables read know nothing of them).

Each stop has its own stop reason and a diagnostic naming the limit, so a parent reads it like any other
failure (``Error: subagent run hit its step limit before finishing\\nDiagnostic: …``).

Budgets are per activation: a continuable child keeps its own settings across resumes within one
process, and gets the hub's defaults after a restart (like ``max_tokens``, they are not in the
descriptor, whose fields the reference fixes). Token counts start from the agent's own logged usage.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Sequence

from .checks import check_count, check_seconds
from .states import TurnEnd

DEFAULT_MAX_STEPS = 50

MAX_STEPS = TurnEnd.MAX_STEPS
TOKEN_BUDGET = TurnEnd.TOKEN_BUDGET
MAX_TIME = TurnEnd.MAX_TIME
#: cancellation cause of a turn stopped by its wall-clock budget
TIME_CAUSE = "time-limit"
#: characters a token of the prompt estimate: a common mean for English text and JSON under BPE
#: tokenizers (code, CJK text and long numbers tokenize denser: their estimate is low, see the guarantee)
CHARS_PER_TOKEN = 4


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


# -- reservations (see the module docstring) ---------------------------------------------------------
#
# A budgeted node is any object with ``limits.token_budget`` (not None), ``subtree_tokens`` (settled
# tokens of its subtree), ``reserved_tokens`` (reservations in flight), ``budget_waiters`` (futures of
# calls waiting for room, or None), ``id`` and ``parent``: an Agent.


class Reservation:
    """Tokens one model call holds on every budget of its path until it settles (or is released)."""

    __slots__ = ("tokens", "nodes")

    def __init__(self, tokens: int, nodes: Sequence[Any]) -> None:
        self.tokens = tokens
        self.nodes = nodes

    def __repr__(self) -> str:
        return f"Reservation({self.tokens} tokens on {[n.id for n in self.nodes]})"


def budgeted(agent: Any) -> list | None:
    """The agents with a token budget on the path from ``agent`` to the root (itself first), or None.
    Called before every model call: no list is made for a path without budgets."""
    nodes = None
    node = agent
    while node is not None:
        if node.limits.token_budget is not None:
            if nodes is None:
                nodes = [node]
            else:
                nodes.append(node)
        node = node.parent
    return nodes


def spent_text(agent: Any, nodes: Sequence[Any]) -> str | None:
    """The diagnostic of the first spent budget among ``nodes`` (settled tokens only), or None."""
    for node in nodes:
        limit = node.limits.token_budget
        if node.subtree_tokens >= limit:
            return token_budget_text(agent.id, node.id, node.subtree_tokens, limit)
    return None


def output_bound(max_tokens: int | None, model: Any) -> int | None:
    """The effective ``max_tokens`` of a call: the agent's, else the model's own integer ``max_tokens``
    attribute (the limit it sends when a request sets none), else None (unknown)."""
    if max_tokens is not None:
        return max_tokens
    declared = getattr(model, "max_tokens", None)
    return declared if isinstance(declared, int) and not isinstance(declared, bool) and declared > 0 else None


def reports_usage(model: Any) -> bool:
    """Whether the model reports the tokens of its calls (``reports_usage = False``: it never does, so
    its calls reserve nothing; an ACP agent's tokens are the external agent's own)."""
    return getattr(model, "reports_usage", True) is not False


def prompt_estimate(system: str, tool_specs: Sequence[Any], messages: Sequence[Any]) -> int:
    """Estimated input tokens of the next request: the previous call's reported size (input + output
    tokens of the last assistant message; 0 when the model reported none) plus the messages after it,
    at CHARS_PER_TOKEN characters a token; with no assistant message yet, the system prompt, the tool
    schemas and every message at that rate. Only the messages since the last call are read."""
    chars = 0
    index = len(messages) - 1
    while index >= 0:
        message = messages[index]
        if message.role == "assistant":
            usage = message.usage
            known = usage.input_tokens + usage.output_tokens if usage is not None else 0
            return known + -(-chars // CHARS_PER_TOKEN)
        chars += _message_chars(message)
        index -= 1
    chars += len(system) + _specs_chars(tool_specs)
    return -(-chars // CHARS_PER_TOKEN)


#: characters of the tool-spec lists seen last, by identity (the hub shares one list per tool view, so
#: a fan-out's children measure it once: ~40 µs for the built-in tools). The list is kept with its count
#: so its id cannot be reused while cached; at most _SPECS_CACHED lists are.
_specs_seen: dict[int, tuple[Sequence[Any], int]] = {}
_SPECS_CACHED = 32


def _specs_chars(tool_specs: Sequence[Any]) -> int:
    seen = _specs_seen.get(id(tool_specs))
    if seen is not None and seen[0] is tool_specs:
        return seen[1]
    chars = sum(len(spec.name) + len(spec.description) + len(repr(spec.parameters)) for spec in tool_specs)
    if len(_specs_seen) >= _SPECS_CACHED:
        _specs_seen.pop(next(iter(_specs_seen), None), None)
    _specs_seen[id(tool_specs)] = (tool_specs, chars)
    return chars


def _message_chars(message: Any) -> int:
    chars = 0
    for block in message.content:
        if block.type == "tool-call":
            chars += len(block.name) + len(repr(block.arguments))
        else:
            chars += len(block.text)
    return chars


def reserve(agent: Any, nodes: Sequence[Any], bound: int | None, prompt: Any) -> "Reservation | str | Any":
    """Reserve one call of ``agent`` on ``nodes`` (:func:`budgeted`), all or nothing, without awaiting:
    a Reservation; a spent budget's diagnostic (the call is not made); or, when calls in flight hold
    the room, a coroutine that waits for them and returns one of those two. ``prompt``: a callable
    giving the prompt estimate, asked only when the call is admitted."""
    held = _try_reserve(agent, nodes, bound, prompt)
    if held.__class__ is Reservation or held.__class__ is str:
        return held
    return _reserve_when_room(agent, nodes, bound, prompt, held)


async def _reserve_when_room(agent: Any, nodes: Sequence[Any], bound: int | None, prompt: Any,
                             blocked: Any) -> "Reservation | str":
    loop = asyncio.get_running_loop()
    while True:
        waiter = loop.create_future()
        if blocked.budget_waiters is None:
            blocked.budget_waiters = [waiter]
        else:
            blocked.budget_waiters.append(waiter)
        await waiter
        held = _try_reserve(agent, nodes, bound, prompt)
        if held.__class__ is Reservation or held.__class__ is str:
            return held
        blocked = held


def _try_reserve(agent: Any, nodes: Sequence[Any], bound: int | None, prompt: Any) -> Any:
    """A Reservation, a spent budget's diagnostic, or the first node without room (to wait on)."""
    blocked = None
    room = None
    for node in nodes:
        limit = node.limits.token_budget
        used = node.subtree_tokens
        if used >= limit:
            return token_budget_text(agent.id, node.id, used, limit)
        left = limit - used - node.reserved_tokens
        if left <= 0:
            if blocked is None:
                blocked = node
        elif room is None or left < room:
            room = left
    if blocked is not None:
        return blocked
    estimate = prompt()
    tokens = estimate + bound if bound is not None else max(room, estimate)
    for node in nodes:
        node.reserved_tokens += tokens
    return Reservation(tokens, nodes)


def release(held: Reservation) -> None:
    """Give a call's reservation back (settled, failed or cancelled) and wake the calls waiting for room."""
    tokens = held.tokens
    for node in held.nodes:
        node.reserved_tokens -= tokens
        waiters = node.budget_waiters
        if waiters is not None:
            node.budget_waiters = None
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
