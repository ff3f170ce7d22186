"""The exception tree of toh_nb, documented in one place.

Everything the library raises on purpose derives from :class:`TohError`, so a notebook can catch the
whole family with one ``except``::

    TohError
    ├── UsageError            wrong arguments to a public API, a closed hub, calling the sync facade
    │   └── ClosedError       from its own loop thread, …; the hub stays usable after one of these
    ├── SubagentError         refusals of the subagent service; ``.code`` is the reference code
    │   │                     (UNAUTHORIZED, NOT_RESUMABLE, NO_PROVIDER, DUPLICATE_PROVIDER, …) and the
    │   │                     message is the reference's exact text
    │   └── ProviderError     unknown provider / missing capability (also a UsageError)
    ├── SubagentDepthError    a delegation deeper than ``max_depth`` (``subagent depth 4 exceeds maxDepth 3``)
    ├── JobError              refusals of the job registry (``unknown job subagent-9`` …)
    ├── ToolError             a tool call that cannot run (unknown tool, invalid arguments)
    ├── StoreError            the session store refused an operation (invalid id, locked directory, …)
    └── ModelError            a model could not answer
        ├── ScriptExhausted   a ScriptedModel ran out of scripted turns
        └── ReplayMissError   a ReplayModel got a request that was never recorded

Inside an agent turn none of these escape: a tool's error becomes an ``Error: <message>`` tool result the
model sees, and a model error ends the turn with stop reason ``error``.
"""

from __future__ import annotations


class TohError(Exception):
    """Base class of every error toh_nb raises on purpose."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of the full traceback: the message first, then only the frames
        outside toh_nb (the user's cells), not the portal's and engine's internals."""
        import os
        import traceback

        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
        frames = [f for f in traceback.extract_tb(self.__traceback__) if not f.filename.startswith(package)]
        hidden = len(traceback.extract_tb(self.__traceback__)) - len(frames)
        lines = [f"{type(self).__name__}: {self}"]
        if frames:
            lines.append(f"Traceback (most recent call last; {hidden} toh_nb frames hidden):")
            lines.extend(line.rstrip("\n") for line in traceback.format_list(frames))
        return lines


class UsageError(TohError, ValueError):
    """A public API was called with arguments or in a state it does not accept."""


class ClosedError(UsageError):
    """The hub (or runtime) was closed; nothing more can be started on it."""


class SubagentError(TohError):
    """A refusal of the subagent service, carrying the reference's code and exact message."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self):  # keep pickling (multiprocessing, copy) working with the extra argument
        return (type(self), (str(self), self.code))


class ProviderError(SubagentError, UsageError):
    """An unknown provider name, or a call needing a capability the provider lacks (``.code``
    ``NO_PROVIDER`` / ``UNSUPPORTED_CAPABILITY``): both a usage error and a subagent refusal."""


class SubagentDepthError(TohError):
    """A child would sit deeper than the configured ``max_depth``."""

    def __init__(self, attempted_depth: int, max_depth: int) -> None:
        super().__init__(f"subagent depth {attempted_depth} exceeds maxDepth {max_depth}")
        self.attempted_depth = attempted_depth
        self.max_depth = max_depth

    def __reduce__(self):
        return (type(self), (self.attempted_depth, self.max_depth))


class JobError(TohError):
    """A refusal of the background job registry."""


class ToolError(TohError):
    """A tool call could not be dispatched (unknown tool, invalid arguments)."""


class StoreError(TohError):
    """The session store refused an operation (invalid id, a second writer, an unreadable log)."""


class ModelError(TohError):
    """A model could not produce a response."""


class ScriptExhausted(ModelError):
    """A ScriptedModel was asked for a turn its script does not have."""


class ReplayMissError(ModelError):
    """A ReplayModel was asked for a request that was not recorded."""


def describe(error: BaseException) -> str:
    """``Name: message`` — how a failure is shown where its type matters (job details)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
