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
    ├── ModelError            a model could not answer (inside the engine: the turn ends ``error``)
    │   ├── ScriptExhausted   a ScriptedModel ran out of scripted turns
    │   └── ReplayMissError   a ReplayModel got a request that was never recorded
    └── RunError              a call *you* made (``hub.run``, a foreground ``hub.spawn``, ``kid.wait``,
                              ``job.result``) waited for a turn that ended ``error``; ``.result`` is its
                              RunResult, ``.cause`` one word (``model``, ``store``, ``agent process``,
                              ``placement``…); ``check=False`` returns the result instead

Inside an agent turn none of these escape: a tool's error becomes an ``Error: <message>`` tool result the
model sees, and a model error ends the turn with stop reason ``error``. A child's failure stays data for
its parent's model (the tool result or the settlement notice); only a person's own call raises.
"""

from __future__ import annotations


class TohError(Exception):
    """Base class of every error toh_nb raises on purpose: ``except tn.TohError`` catches them all.

    Never raised itself; each subclass says when it is raised. In IPython it shows its message first
    and only the frames of your cells, hiding toh_nb's own.
    """

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
    """A public API was called with arguments or in a state it does not accept.

    Raised at the call, before anything is started or written, with a message naming the parameter or
    the state that is wrong (``max_steps must be a positive integer, got -1``); the hub stays usable.
    Also a ``ValueError``, so code catching that keeps working.

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/
    """


class ClosedError(UsageError):
    """The hub (or runtime, or the portal loop under a sync hub) was closed; it answers nothing more.

    Raised by every call on a closed ``tn.Hub`` and its handles, reads included (``run``, ``spawn``,
    ``start``, ``send``, ``interrupt``, ``agents()``, ``jobs()``, ``transcript()``, ``events()``,
    ``tree()``, ``job.output()``, ``kid.wait()``, …: "this hub is closed"); by the calls of a closed
    ``tn.AsyncHub`` that would start work (``run``, ``spawn``, ``start``, ``send``; its reads still answer
    from what it held); and by waits that a ``hub.close()`` cut short. Open a new hub (on the same
    ``store=`` directory to continue its tree). A ``UsageError``.

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#this-hub-is-closed-create-a-new-hub-to-continue
    """


class SubagentError(TohError):
    """A refusal of the subagent service, carrying the reference's code and exact message.

    Raised when a hub call is refused for the same reason the model's tool would be (a message to an
    agent the caller may not reach, a continuable child that cannot resume, …). Inside a turn the model
    reads the same refusal as an ``Error: …`` tool result instead.

    Args:
        message: the reference's exact text, which is also ``str(error)``.
        code: the reference's code, kept as ``.code`` (``UNAUTHORIZED``, ``NOT_RESUMABLE``,
            ``NO_PROVIDER``, ``DUPLICATE_PROVIDER``, …).

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#delegation
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self):  # keep pickling (multiprocessing, copy) working with the extra argument
        return (type(self), (str(self), self.code))


class ProviderError(SubagentError, UsageError):
    """An unknown provider name, or a call needing a capability the provider lacks.

    Raised by ``spawn``/``start`` (and the delegation tool, as a refusal) when ``provider=`` names no
    registered provider (``.code`` ``NO_PROVIDER``) or the call asks for what the provider cannot do, such
    as a persona or a tool filter for an external ACP agent (``UNSUPPORTED_CAPABILITY``). Both a
    ``UsageError`` and a ``SubagentError``.

    Args:
        message: what is wrong, naming the provider.
        code: ``NO_PROVIDER`` or ``UNSUPPORTED_CAPABILITY`` (kept as ``.code``).
    """


class SubagentDepthError(TohError):
    """A child would sit deeper than the configured ``max_depth``.

    Raised when a delegation would start a child deeper than the hub's (or the delegation tool's)
    ``max_depth``; its message is the reference's ``subagent depth <n> exceeds maxDepth <m>``.

    Args:
        attempted_depth: the depth the child would have had (kept as ``.attempted_depth``).
        max_depth: the limit in force (kept as ``.max_depth``).

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#subagent-depth-4-exceeds-maxdepth-3
    """

    def __init__(self, attempted_depth: int, max_depth: int) -> None:
        super().__init__(f"subagent depth {attempted_depth} exceeds maxDepth {max_depth}")
        self.attempted_depth = attempted_depth
        self.max_depth = max_depth

    def __reduce__(self):
        return (type(self), (self.attempted_depth, self.max_depth))


class JobError(TohError):
    """A refusal of the background job registry.

    Raised when a job call names no job of this hub (``unknown job subagent-9``), or a start would
    exceed ``max_jobs_per_owner`` active jobs of one owner.

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#unknown-job-subagent-9
    """


class ToolError(TohError):
    """A tool call could not be dispatched (unknown tool, invalid arguments).

    Raised when a tool is called by a name no agent is offered, or with arguments its schema rejects.
    Inside a turn the model reads it as an ``Error: …`` tool result; it reaches your code only from a
    call you make yourself.
    """


class StoreError(TohError):
    """The session store refused an operation (invalid id, a second writer, an unreadable log).

    Raised when ``tn.Hub(store=...)`` finds the directory held by another hub (``… is in use by another
    hub (pid N)``), when an id does not match the id grammar, and when a damaged log is read for a
    transcript or a resume (the message names the file, line and field).

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#hubs-and-stores
    """

    #: what a turn that ended on this error names as its cause (:class:`RunError`)
    cause = "store"


class ModelError(TohError):
    """A model could not produce a response.

    Raised by a model's ``request`` (an HTTP error after its retries, a response of the wrong shape, an
    unknown ``stop_reason``). The engine never lets it escape a turn: the turn ends with stop reason
    ``error`` and the message becomes its diagnostic.

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#models

    Args:
        cause: what failed, in one word, for the :class:`RunError` a person's call then raises: ``model``
            (the default), ``agent process`` (an external agent's process), ``placement`` (where a remote
            child runs) …
    """

    cause = "model"

    def __init__(self, *args: object, cause: str | None = None) -> None:
        super().__init__(*args)
        if cause is not None:
            self.cause = cause

    def __reduce__(self):  # pickling (Ray) keeps the cause
        return (_model_error, (type(self), self.args, self.cause))


class ScriptExhausted(ModelError):
    """A ScriptedModel was asked for a turn its script does not have.

    Raised when an agent makes more model calls than its script has steps; the message names the agent
    and the step, and the turn ends ``error`` with it as the diagnostic.
    """


class ReplayMissError(ModelError):
    """A ReplayModel was asked for a request that was not recorded.

    Raised when a replayed session sends a request whose digest is not in the recording (the prompt,
    the system prompt or the tools changed since it was made): record it again.
    """


def describe(error: BaseException) -> str:
    """``Name: message`` — how a failure is shown where its type matters (job details)."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _model_error(cls: type, args: tuple, cause: str) -> ModelError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.cause = cause
    return error


class RunError(TohError):
    """A call a person made waited for a turn that ended with stop reason ``error``.

    Raised by ``hub.run``, a foreground ``hub.spawn``, ``kid.wait`` (when the activation it waited for
    ended ``error``) and ``job.result``, on both faces; ``check=False`` on those calls returns the
    result instead. Other stop reasons (``aborted``, ``max-steps``…) return the result. The message is the
    run's headline and diagnostic::

        try:
            hub.run("Plan X")
        except tn.RunError as error:
            print(error.cause, error.result.diagnostic)

    Troubleshooting: https://toh-nb.github.io/toh_nb/troubleshooting/#runerror-the-roots-turn-failed-model

    Args:
        message: the headline and diagnostic (``str(error)``).
        result: the run's :class:`~toh_nb.results.RunResult` (kept as ``.result``).
        cause: one word (kept as ``.cause``): ``model``, ``store``, ``agent process``, ``placement`` …
    """

    def __init__(self, message: str, result: object, cause: str) -> None:
        super().__init__(message)
        self.result = result
        self.cause = cause

    def __reduce__(self):
        return (type(self), (str(self), self.result, self.cause))


def cause_of(error: BaseException) -> str:
    """The one word a failed turn names as its cause: the error's own ``cause`` (a ModelError says which
    part failed, a StoreError is ``store``), else ``model`` (a model function that raised)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, str) and cause else "model"
