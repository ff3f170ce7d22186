"""Deprecated: moved to :mod:`toh_nb.core.launcher` (kept one release; see toh_nb._moved)."""

from toh_nb._moved import forward

__getattr__, __dir__ = forward(__name__)
