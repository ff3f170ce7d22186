"""Threads for blocking work, kept apart so that user code can never starve the engine.

Why: sync tools, sync model functions and the engine's own blocking reads used to share the loop's
default executor (``min(32, cpus + 4)`` threads, six on a small machine). A sync tool stuck in
``time.sleep`` or ``input()`` keeps its thread after its turn ended ``max-time`` or was interrupted --
Python cannot stop a thread -- so six of them left every hub of the kernel without a thread: a plain
``hub.run("hello")`` with a sync model ended ``max-time`` with no answer, and unrelated hubs slowed down.

So there are two kinds of thread:

- :func:`run_engine`: the package's own blocking work (reading a stored log on a resume, a recording's
  writes, starting and stopping a Ray pool) runs on :data:`ENGINE_THREADS` threads of its own, which
  user code never gets;
- :class:`UserThreads`: each hub (``runtime.user_threads``) runs its sync tools and sync model
  functions on its own pool of up to :data:`USER_THREADS` threads. A call whose awaiting turn is
  cancelled (interrupt, ``turn_timeout``, kill, ``hub.close()``) while its function still runs is
  *abandoned*: its thread stays busy until the function returns, so the pool grows by one thread for
  each abandoned call (the work that follows is never starved by it), up to :data:`MAX_ABANDONED`
  abandoned calls; past that a new sync call of that hub fails at once with an error naming the stuck
  calls (a tool result ``Error: ...``, or a model error ending the turn), while async tools, async
  models and every other hub carry on. Abandoned calls are counted per agent (``abandoned_tools`` in
  ``hub.agents()``) and announced on the stream (:class:`~toh_nb.core.events.ToolAbandoned`).

What a timed-out sync call leaves behind: its thread, running until the function returns on its own
(a ``time.sleep`` ends, ``input()`` gets a line, a socket times out); what it returns then is dropped.
The threads are daemon threads: ``hub.close()`` does not wait for them, and neither does the
interpreter at exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import itertools
import threading
import weakref
from collections import Counter, deque
from typing import Any, Callable

from .errors import ClosedError

#: threads of the engine's own blocking work, shared by every hub of the process
ENGINE_THREADS = 4
#: sync calls (tools, model functions) one hub runs at once; more wait for a free thread
USER_THREADS = 16
#: abandoned calls one hub tolerates: the pool grows past USER_THREADS by one thread for each; past this
#: many, a new sync call fails at once
MAX_ABANDONED = 32
#: seconds an idle user thread waits for work before it ends (a quiet hub holds no threads)
IDLE_SECONDS = 30.0

_engine: concurrent.futures.ThreadPoolExecutor | None = None
_engine_lock = threading.Lock()


async def run_engine(fn: Callable[..., Any], *args: Any) -> Any:
    """Run the engine's own blocking ``fn(*args)`` off the loop, on threads user code never holds."""
    global _engine
    if _engine is None:
        with _engine_lock:
            if _engine is None:
                _engine = concurrent.futures.ThreadPoolExecutor(ENGINE_THREADS, thread_name_prefix="toh-engine")
    return await asyncio.get_running_loop().run_in_executor(_engine, functools.partial(fn, *args))


def stuck_text(what: str, stuck: list[tuple[str | None, str]], cap: int) -> str:
    """Why a new sync call was refused: the abandoned calls that hold this hub's threads."""
    counts = Counter(stuck)
    shown = ", ".join(f"{name} \u00d7{n} (agent {owner})" if n > 1 else f"{name} (agent {owner})"
                      for (owner, name), n in counts.most_common())
    return (f"no thread for {what}: {len(stuck)} sync calls of this hub are still running after their turns "
            f"ended ({shown}); each keeps its thread until its function returns (Python cannot stop a "
            f"thread), and the hub refuses new sync calls while {cap} are stuck")


def abandoned_text(name: str, stuck: int) -> str:
    """The detail of a ToolAbandoned event."""
    return (f"{name} still runs after its turn ended; its thread is left to finish on its own "
            f"({stuck} abandoned in this hub)")


class _Call:
    """One sync call: what runs, who waits for it, and how it stands."""

    __slots__ = ("fn", "args", "context", "loop", "future", "name", "owner", "started", "done", "abandoned")

    def __init__(self, fn: Callable[..., Any], args: tuple, loop: asyncio.AbstractEventLoop,
                 future: asyncio.Future, name: str, owner: str | None) -> None:
        self.fn = fn
        self.args = args
        self.context = contextvars.copy_context()  # as asyncio.to_thread: the caller's context variables
        self.loop = loop
        self.future = future
        self.name = name
        self.owner = owner
        self.started = False
        self.done = False
        self.abandoned = False


def _settle(future: asyncio.Future, value: Any, error: BaseException | None) -> None:
    if future.done():  # its waiter was cancelled: the call was abandoned, its outcome is dropped
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class _Pool:
    """The threads and their queue. Threads hold only this (never the UserThreads, whose callback
    reaches the hub): a dropped, never-closed hub is not kept alive by its idle threads."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self.numbers = itertools.count(1)
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.work: deque[_Call] = deque()
        self.idle = 0
        self.threads = 0
        self.abandoned: dict[_Call, None] = {}  # insertion-ordered set
        self.closed = False

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.wake.notify_all()

    def dispatch(self) -> None:
        """With the lock held: wake an idle thread for queued work, or start one while under the cap
        (which grows by one for each abandoned call: the thread it keeps is not the pool's any more)."""
        if len(self.work) <= self.idle:
            self.wake.notify()
        elif self.threads < self.size + len(self.abandoned):
            self.threads += 1
            threading.Thread(target=self.serve, name=f"{self.name}-{next(self.numbers)}", daemon=True).start()

    def serve(self) -> None:
        while True:
            with self.lock:
                while not self.work and not self.closed:
                    self.idle += 1
                    woken = self.wake.wait(IDLE_SECONDS)
                    self.idle -= 1
                    if not woken and not self.work:
                        break
                if not self.work:
                    self.threads -= 1
                    return
                call = self.work.popleft()
                call.started = True
            value, error = None, None
            try:
                value = call.context.run(call.fn, *call.args)
            except BaseException as failure:  # noqa: BLE001 - handed to the waiter, as an executor does
                error = failure
            with self.lock:
                call.done = True
                self.abandoned.pop(call, None)
            try:
                call.loop.call_soon_threadsafe(_settle, call.future, value, error)
            except RuntimeError:  # the loop closed meanwhile: nobody waits any more
                pass
            del call, value, error


class UserThreads:
    """One hub's threads for user code (see the module docstring). ``on_abandoned(owner, name, stuck)``
    is called on the loop when a call is abandoned (``stuck``: the hub's abandoned calls now)."""

    def __init__(self, *, size: int | None = None, max_abandoned: int | None = None,
                 on_abandoned: Callable[[str | None, str, int], None] | None = None,
                 name: str = "toh-user") -> None:
        self.max_abandoned = max_abandoned if max_abandoned is not None else MAX_ABANDONED
        self.on_abandoned = on_abandoned
        self._pool = pool = _Pool(size if size is not None else USER_THREADS, name)
        weakref.finalize(self, pool.close)  # a hub dropped without close(): its idle threads end now

    async def run(self, fn: Callable[..., Any], *args: Any, name: str, owner: str | None = None,
                  refuse: type[Exception] = RuntimeError) -> Any:
        """``fn(*args)`` on one of these threads. ``name`` says what it is in messages (``tool "x"``),
        ``owner`` the agent it runs for; ``refuse`` is the error raised when abandoned calls hold too
        many threads."""
        loop = asyncio.get_running_loop()
        call = _Call(fn, args, loop, loop.create_future(), name, owner)
        pool = self._pool
        with pool.lock:
            if pool.closed:
                raise ClosedError(f"this hub is closed: {name} cannot run")
            if len(pool.abandoned) >= self.max_abandoned:
                raise refuse(stuck_text(name, [(c.owner, c.name) for c in pool.abandoned], self.max_abandoned))
            pool.work.append(call)
            pool.dispatch()
        try:
            return await call.future
        except asyncio.CancelledError:
            stuck = 0
            with pool.lock:
                if call.started and not call.done:
                    call.abandoned = True
                    pool.abandoned[call] = None
                    stuck = len(pool.abandoned)
                    pool.dispatch()  # the pool grew by the thread this call keeps
                elif not call.started:
                    pool.work.remove(call)
            if stuck and self.on_abandoned is not None:
                self.on_abandoned(owner, name, stuck)
            raise

    def abandoned(self) -> list[tuple[str | None, str]]:
        """``(owner, name)`` of each abandoned call whose function still runs, oldest first."""
        with self._pool.lock:
            return [(call.owner, call.name) for call in self._pool.abandoned]

    def abandoned_by_owner(self) -> dict[str | None, int]:
        with self._pool.lock:
            return dict(Counter(call.owner for call in self._pool.abandoned))

    def close(self) -> None:
        """No new calls; idle threads end now, busy ones when their function returns. Never waits."""
        self._pool.close()


#: the user threads of the hub whose agent is running (set by the agent's driver), for sync model
#: functions, which are called with a request only
current_user_threads: contextvars.ContextVar[UserThreads | None] = contextvars.ContextVar(
    "toh_nb_user_threads", default=None)
_outside = UserThreads(name="toh-user-outside")


def user_threads() -> UserThreads:
    """The running agent's hub's user threads; outside any agent (a model called directly), a shared
    pool of the same kind -- never the loop's default executor or the engine's threads."""
    return current_user_threads.get() or _outside
