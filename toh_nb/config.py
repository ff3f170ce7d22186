"""HubConfig: the one definition of a hub's configuration, checked once.

``tn.Hub(...)`` and ``tn.AsyncHub(...)`` take the same keyword arguments (``Hub`` adds ``loop``). Both
build a :class:`HubConfig` from them: its fields are the arguments, its defaults are the defaults, and
its checks run when it is built -- so a refused configuration is refused before any store is opened,
locked or taken over, with the same :class:`~toh_nb.core.errors.UsageError` from either twin. The
signatures of the two constructors stay explicit keyword lists (an editor completes them);
``tests/test_hub_config.py`` checks that they list exactly these fields with exactly these defaults.

A config can also be built once and reused: ``AsyncHub.from_config(config)``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .core.budget import DEFAULT_MAX_STEPS, Limits
from .core.checks import check_count, shown
from .core.errors import UsageError
from .core.events import DEFAULT_HISTORY
from .core.ids import invalid_id, is_valid_id
from .costs import CostBook
from .models.names import ModelLike, model_of
from .store.base import SessionStore
from .subagents.arguments import validate_max_depth
from .tracing import check_tracing  # the check only: OpenTelemetry is imported when tracing is on

BACKGROUND_MODES = ("one-shot", "continuable")
EMPTY_STORE = ('store is an empty path (an unset environment variable?); pass a directory, "." for the '
               "current one, or None for an in-memory store")


def check_root_id(root_id: Any) -> None:
    """``root_id`` is None or an id of the id grammar: checked before the store is opened, so an id that
    is a path (``toh-x/../../victim``) never has a store directory made or locked for it."""
    if root_id is not None and not is_valid_id(root_id):
        raise UsageError(invalid_id(root_id, "root_id") if isinstance(root_id, str)
                         else f"root_id must be a string or None, got {type(root_id).__name__}")


def check_store(store: Any) -> None:
    """``store`` is not an empty path: ``""`` (an unset environment variable, typically) would make the
    current directory a store, its lock and logs landing among the user's files. ``"."`` says so on
    purpose and stays allowed; the type is checked where the store is opened."""
    if isinstance(store, (str, bytes)) or hasattr(store, "__fspath__"):
        try:
            path = os.fspath(store)
        except TypeError:  # a __fspath__ returning neither str nor bytes: open_store names the type
            return
        if isinstance(path, (str, bytes)) and not path:
            raise UsageError(EMPTY_STORE)


def check_tool_lists(tools: Any, delegation_tools: Any) -> None:
    """``tools`` and ``delegation_tools`` are lists (a string or a single tool is a common slip)."""
    if isinstance(tools, (str, bytes)) or not isinstance(tools, (list, tuple)):
        raise UsageError(f"tools must be a list of functions or tn.Tool objects, got {type(tools).__name__}")
    if delegation_tools is not None and not isinstance(delegation_tools, (list, tuple)):
        raise UsageError("delegation_tools must be a list of tn.SubagentTool (or dicts of its settings), "
                         f"got {type(delegation_tools).__name__}")


def check_gc(gc: Any) -> bool | None:
    """``gc``: ``None`` (this process's choice, ``toh_nb.core.gc_policy.set_enabled``; off unless set),
    ``True`` (apply the GC policy while the hub is open) or ``False`` (never)."""
    if gc is not None and not isinstance(gc, bool):
        raise UsageError(f"gc must be True, False or None, got {shown(gc)}")
    return gc


def fsync_policies() -> tuple[str, ...]:
    from .store.jsonl import (
        FSYNC_POLICIES,  # imported when asked: a hub without a directory never loads it
    )

    return FSYNC_POLICIES


@dataclass(frozen=True)
class HubConfig:
    """Everything a hub is built from (the keyword arguments of ``Hub``/``AsyncHub``, see the README's
    "Hub options" table). Built checked: a bad value raises a UsageError naming the argument.

    ``tn.AsyncHub.from_config(config)`` opens a hub from one, so a checked configuration can be kept and
    reused; ``config.replace(max_steps=10)`` is a copy with some fields changed (checked again). Each field
    is the hub argument of the same name (described in full under :class:`~toh_nb.AsyncHub`).

    Args:
        model: the root's model, and its children's unless they are given one: a model object, a name
            (``"openai:gpt-4o"``, ``"ollama:llama3.1"``, ``"local"``, … see :mod:`toh_nb.models.names`) or a
            plain function of the request (``None``: the offline ``tn.DemoModel``). A name or a function is
            built into its model object when the config is built, so ``config.model`` is that object.
        store: ``None`` (in memory), a directory path (one JSONL log per agent, so continuable children
            survive a restart) or a ``SessionStore`` object.
        max_depth: the deepest child a delegation may start (0 forbids delegation; ``"provider-managed"``
            sends no cap).
        max_parallel_tool_calls: tool calls of one model response run at once.
        ids: ``"uuid"`` or ``"sequential"`` (``agent-1``, ``agent-2``, …: reproducible output).
        background_mode: what ``run_in_background`` starts by default: ``"one-shot"`` (a job) or
            ``"continuable"`` (a child).
        tools: your tools for every agent: typed functions, ``tn.Tool``, ``tn.SubagentTool`` or
            ``tn.MCPServer`` objects.
        delegation_tools: the delegation tools every agent is offered (``tn.SubagentTool`` objects or dicts
            of their settings); ``None``: one ``subagent`` tool.
        root_id: the root agent's id (``None``: the store's newest root, else a new one).
        fsync: the JSONL store's durability: ``"batch"``, ``"always"`` or ``"never"`` (``None``: the
            store's default, ``"batch"``).
        max_jobs_per_owner: background jobs one agent may have running at once.
        report_delivery: ``"next-step"`` (a child's report wakes its parent) or ``"quiet"`` (reports wait for
            the parent's next turn).
        max_tokens: the completion limit of the root's model calls (children inherit it).
        max_steps: model calls per turn (``None``: no limit).
        token_budget: input plus output tokens of the root and all its descendants (``None``: no limit).
        turn_timeout: wall-clock seconds per turn (``None``: no limit).
        providers: more ways of making children, by name: ``{"coder": tn.AcpAgent([...])}``.
        history: lifecycle events kept for ``hub.events()`` and ``stream(history=True)``.
        prices: input and output price per million tokens, keyed by model name
            (``{"gpt-4o-mini": (0.15, 0.60)}``).
        tracing: ``True``, a ``TracerProvider`` or ``tn.Tracing(...)`` emits the agent tree as OpenTelemetry
            spans; ``None``/``False``: no tracing (nothing of OpenTelemetry is imported).
        gc: ``True`` applies the benchmarks' garbage-collector policy while the hub is open; ``False``
            never; ``None``: the process's choice (``toh_nb.core.gc_policy.set_enabled``, off unless set).

    Raises:
        UsageError: a value of the wrong type or range, naming the argument (a model that is neither a
            model object, a known name nor a function; an empty ``store`` path; an unknown ``background_mode`` or ``fsync``, a ``root_id`` outside the id
            grammar, …); raised before any store is opened.
    """

    model: ModelLike = None
    store: str | os.PathLike[str] | SessionStore | None = None
    max_depth: int | str = 3
    max_parallel_tool_calls: int = 10
    ids: str = "uuid"
    background_mode: str = "one-shot"
    tools: Sequence[Any] = ()
    delegation_tools: Sequence[Any] | None = None
    root_id: str | None = None
    fsync: str | None = None
    max_jobs_per_owner: int = 10
    report_delivery: str = "next-step"
    max_tokens: int | None = None
    max_steps: int | None = DEFAULT_MAX_STEPS
    token_budget: int | None = None
    turn_timeout: float | None = None
    providers: Mapping[str, Any] | None = None
    history: int = DEFAULT_HISTORY
    prices: Mapping[str, tuple[float, float]] | None = None
    tracing: Any = None
    gc: bool | None = None

    def __post_init__(self) -> None:
        check_store(self.store)
        # a name ("openai:gpt-4o") or a plain function becomes its model object here, once, for both twins
        object.__setattr__(self, "model", model_of(self.model))
        validate_max_depth(self.max_depth)
        Limits.checked(self.max_steps, self.token_budget, self.turn_timeout)
        check_count(self.max_tokens, "max_tokens", none="")
        check_count(self.max_jobs_per_owner, "max_jobs_per_owner")
        check_count(self.max_parallel_tool_calls, "max_parallel_tool_calls")
        check_count(self.history, "history", minimum=0, note="events kept for hub.events()")
        if self.background_mode not in BACKGROUND_MODES:
            raise UsageError(f'background_mode must be "one-shot" or "continuable", got {self.background_mode!r}')
        check_tool_lists(self.tools, self.delegation_tools)
        if self.fsync is not None and self.fsync not in fsync_policies():  # also when no store= directory uses it
            raise UsageError(f'fsync must be "batch", "always" or "never", got {shown(self.fsync)}')
        CostBook(self.prices)  # checked before the store is opened
        check_root_id(self.root_id)
        if self.providers is not None and not isinstance(self.providers, Mapping):
            raise UsageError(f"providers must be a dict of name -> provider, got {type(self.providers).__name__}")
        check_tracing(self.tracing)
        check_gc(self.gc)

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> HubConfig:
        """The config from a constructor's arguments (``locals()``: its other names are ignored), so the
        twins never copy the list of keywords by hand."""
        return cls(**{name: arguments[name] for name in FIELDS if name in arguments})

    def replace(self, **changes: Any) -> HubConfig:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    @property
    def limits(self) -> Limits:
        """The root's limits (``max_steps``, ``token_budget``, ``turn_timeout``)."""
        return Limits.checked(self.max_steps, self.token_budget, self.turn_timeout)

    @property
    def store_options(self) -> dict[str, Any]:
        """Keywords for ``open_store`` (``fsync`` when given)."""
        return {"fsync": self.fsync} if self.fsync is not None else {}

    def open_store(self) -> SessionStore:
        """The store this config names, opened (``None``: in memory; a path: the JSONL directory, locked;
        a store object: itself, fitted with the defaults of the optional abilities it lacks)."""
        from .store import open_store

        return open_store(self.store, **self.store_options)


#: the configuration's field names, in the constructors' order
FIELDS = tuple(field.name for field in dataclasses.fields(HubConfig))
