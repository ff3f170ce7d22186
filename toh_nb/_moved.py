"""Old import paths kept for one release after a move (issue #28): each old module is a small shim that
warns once, at import, with a ``DeprecationWarning`` naming the new path, and forwards every attribute to
the module now at that path (PEP 562 ``__getattr__``), so ``from toh_nb.acp.permissions import AskUser``
and ``toh_nb.acp.permissions.answer(...)`` keep working and say where to go.

The table is the one place listing what moved; ``tests/test_moved_paths.py`` imports every entry."""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

#: old module path -> new module path
MOVED = {
    "toh_nb.acp": "toh_nb.providers.acp",
    "toh_nb.acp.link": "toh_nb.providers.acp.link",
    "toh_nb.acp.permissions": "toh_nb.providers.acp.permissions",
    "toh_nb.acp.process": "toh_nb.providers.acp.process",
    "toh_nb.acp.provider": "toh_nb.providers.acp.provider",
    "toh_nb.acp.stops": "toh_nb.providers.acp.stops",
    "toh_nb.acp.transport": "toh_nb.providers.acp.transport",
    "toh_nb.acp.workspace": "toh_nb.providers.acp.workspace",
    "toh_nb.acp.server": "toh_nb.serve.acp",
    "toh_nb.acp.server_io": "toh_nb.serve.stdio",
    "toh_nb.ray": "toh_nb.providers.ray",
    "toh_nb.ray.host": "toh_nb.providers.ray.host",
    "toh_nb.ray.pool": "toh_nb.providers.ray.pool",
    "toh_nb.ray.provider": "toh_nb.providers.ray.provider",
    "toh_nb.ray.remote": "toh_nb.providers.ray.remote",
    "toh_nb.mcp.server": "toh_nb.serve.mcp",
    "toh_nb.models.serve": "toh_nb.serve.model",
    "toh_nb.models.local": "toh_nb.models.local_model",
    "toh_nb.activations": "toh_nb.timeline",
    "toh_nb.mcp.entries": "toh_nb.serve.mcp_entries",
    "toh_nb.subagents.provider": "toh_nb.providers.base",
    "toh_nb.subagents.providers": "toh_nb.providers.local",
    "toh_nb.providers.acp.launcher": "toh_nb.core.launcher",
}


def moved_text(old: str) -> str:
    """The warning an old path gives (one text, tested exactly)."""
    return f"{old} moved to {MOVED[old]}; the old import path will be removed in the next release"


def forward(old: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Warn that ``old`` moved and return the ``__getattr__`` and ``__dir__`` of its shim."""
    warnings.warn(moved_text(old), DeprecationWarning, stacklevel=3)
    module = importlib.import_module(MOVED[old])

    def __getattr__(name: str) -> Any:
        return getattr(module, name)

    def __dir__() -> list[str]:
        return dir(module)

    return __getattr__, __dir__
