"""What agents cost: a price table the user sets, applied to the tokens each agent used.

Why here and not in the models: prices change and differ per account, so the user states them once
(``tn.Hub(prices={"gpt-4o-mini": (0.15, 0.60)})``: input and output price per million tokens, in the
user's currency) and every display (``hub.agents()``, the tree's rows and header, the static snapshot)
reads the same ``cost`` and ``subtree_cost`` columns. A cost is never guessed: an agent whose model has
no price (or whose model is not known, e.g. one stored by an earlier session) has ``cost`` None, and a
subtree total adds only the costs that are known (None when none is).

An agent's model name is read from its model object while the agent is live (``.model`` of
``OpenAIChatModel``, ``.name`` of ``DemoModel``/``FunctionModel``, through ``RecordingModel``'s
``inner``) and kept for the rest of the session, since a finished one-shot agent leaves the runtime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .core.errors import UsageError
from .core.model import model_name

PER = 1_000_000  # prices are per million tokens


def check_prices(prices: Any) -> dict[str, tuple[float, float]]:
    """``{model name: (input, output)}`` per million tokens, both finite numbers >= 0."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise UsageError("prices must be a dict {model name: (input price, output price) per million tokens}, "
                         f"got {type(prices).__name__}")
    table: dict[str, tuple[float, float]] = {}
    for name, pair in prices.items():
        if not isinstance(name, str) or not name:
            raise UsageError(f"prices: a model name must be a non-empty string, got {name!r}")
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p) and p >= 0 for p in pair)
        if not ok:
            raise UsageError(f"prices[{name!r}] must be (input, output) prices per million tokens, two numbers >= 0, "
                             f"got {pair!r}")
        table[name] = (float(pair[0]), float(pair[1]))
    return table


class CostBook:
    """The hub's price table plus the model name of every agent seen live (see the module docstring)."""

    def __init__(self, prices: Any = None) -> None:
        self.prices = check_prices(prices)
        self.models: dict[str, str | None] = {}

    def note(self, agent_id: str | None, runtime: Any) -> None:
        """Remember the model of a live agent (called for stream events and on every table read)."""
        if agent_id is None or agent_id in self.models:
            return
        agent = runtime.agents.get(agent_id)
        if agent is not None:
            self.models[agent_id] = model_name(agent.model)

    def cost(self, agent_id: str, input_tokens: int, output_tokens: int) -> float | None:
        price = self.prices.get(self.models.get(agent_id) or "")
        if price is None:
            return None
        return (input_tokens * price[0] + output_tokens * price[1]) / PER

    def fill(self, rows: list[dict], runtime: Any) -> list[dict]:
        """Set ``cost`` and ``subtree_cost`` on ``agent_rows`` (pre-order, root first) in place."""
        for row in rows:
            self.note(row["id"], runtime)
            row["cost"] = self.cost(row["id"], row["input_tokens"] or 0, row["output_tokens"] or 0)
        totals: dict[str, float | None] = {}
        for row in reversed(rows):  # children before their parent
            below = totals.pop(row["id"], None)
            own = row["cost"]
            total = below if own is None else own + (below or 0.0)
            row["subtree_cost"] = total
            parent = row["parent"]
            if parent is not None and total is not None:
                totals[parent] = totals.get(parent, 0.0) + total
        return rows


def format_cost(value: float | None) -> str:
    """``0.000123`` (six decimals: fractions of a cent show); empty for an unknown cost."""
    return "" if value is None else f"{value:.6f}"
