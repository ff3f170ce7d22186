"""The portal: one persistent asyncio loop in a daemon thread, shared by every sync ``Hub``.

Why a thread rather than the kernel's own loop: a notebook cell already runs inside a running event
loop, so ``asyncio.run`` fails there and ``loop.run_until_complete`` raises "This event loop is already
running". ``nest_asyncio2`` (the maintained fork of ``nest_asyncio``) works around that by patching
asyncio for the whole process, but it swaps in asyncio's pure-Python Task and Future, cannot patch
uvloop, has been reported to corrupt ipykernel >= 7 kernels, and lets background children run only
while the kernel's loop does. And loop-bound resources (HTTP connection pools) must always see one
loop. So the engine lives on its own loop, in its own thread, and the sync facade *submits* work to it:

- background children keep running between cells and while a cell runs long synchronous code;
- :meth:`Portal.call` from the portal thread itself (a model function, a tool, a listener) raises a
  :class:`~toh_nb.core.errors.UsageError` instead of deadlocking;
- a ``KeyboardInterrupt`` (kernel interrupt) while a caller waits cancels that call's work on the loop,
  waits briefly for the cancellation to land, and re-raises;
- the loop is stopped cleanly when the last hub using it closes (:func:`acquire` / :meth:`Portal.release`),
  by :func:`stop`, and at interpreter exit (``atexit``, which is also how a kernel shuts down).

The submit path is deliberately lean (a sync call to a trivial coroutine costs a few tens of
microseconds): the caller allocates one small record and a lock, hands the record to the loop with
``loop.call_soon_threadsafe``, and blocks on the lock; the loop thread calls the function, wraps an
awaitable result in a task, and releases the lock from the task's done callback. No thread, no
``concurrent.futures.Future`` chaining and no extra loop hop per call.

:func:`call` also accepts a plain function (its return value is the result): the facade uses that to
read loop-owned state (tables, listings) on the loop thread.

``Hub(loop="kernel")`` uses :class:`KernelRunner` instead: see its docstring for the trade-offs.

Why our own portal rather than a library's loop thread (measured, issue 45): after a kernel interrupt,
a coroutine submitted with ``asyncio.run_coroutine_threadsafe`` or anyio's ``start_blocking_portal`` ran
on to its end where ours is cancelled; a call from the loop thread deadlocks the former; and a trivial
call costs 25 µs here against 30 µs and 67 µs.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import inspect
import logging
import sys
import threading
from typing import Any, Callable

from ..core.errors import ClosedError, TohError, UsageError
from .blocking import warn_if_blocking_a_loop

#: seconds a KeyboardInterrupted caller waits for its call's cancellation to land on the loop
CANCEL_GRACE = 2.0
#: seconds between wake-ups of a waiting caller (so a signal handled on another thread still lands)
POLL = 0.1
#: seconds :meth:`Portal.stop` gives the registered hubs to close and the thread to finish
STOP_TIMEOUT = 5.0

_EAGER = sys.version_info >= (3, 12)

GUARD_MESSAGE = (
    "a synchronous toh_nb call was made from the portal's own event-loop thread (for example from a model "
    "function, a tool or an event listener running on the hub's loop); it would wait for itself forever. "
    "Use the async API there instead (await the AsyncHub: hub.async_hub), or hand the work to the loop "
    "without waiting with hub.portal.submit(...)")


class _Call:
    """One submitted call: the function, its arguments and, once finished, its value or error."""

    __slots__ = ("fn", "args", "lock", "value", "error", "task", "cancelled", "finished")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        self.lock = threading.Lock()
        self.lock.acquire()
        self.value: Any = None
        self.error: BaseException | None = None
        self.task: asyncio.Future | None = None
        self.cancelled = False
        self.finished = False


class Portal:
    """An asyncio loop running forever in a daemon thread. Use :func:`acquire` / :func:`get_portal`
    rather than constructing one: the process shares a single running portal."""

    def __init__(self, name: str = "toh_nb-portal") -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._users = 0
        self._closers: dict[int, Callable[[], Any]] = {}
        self._pending: set[_Call] = set()
        self._closed = False  # no new calls accepted
        self._stopping = False
        self._finished = threading.Event()
        ready = threading.Event()
        #: the daemon thread that runs the loop
        self.thread = threading.Thread(target=self._main, args=(ready,), name=name, daemon=True)
        self.thread.start()
        ready.wait()
        self.thread_id = self.thread.ident

    # -- the loop thread -------------------------------------------------------------------------

    def _main(self, ready: threading.Event) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            self._closed = True
            try:
                _cancel_remaining(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                for call in list(self._pending):  # calls whose callback never ran
                    if not call.finished:
                        call.error = ClosedError("the toh_nb portal loop stopped before this call ran; "
                                                 "create a new Hub to continue")
                        _release(call)
                self._pending.clear()
                self._finished.set()

    def _start_call(self, call: _Call) -> None:
        if call.cancelled or self._closed:  # interrupted already, or arrived while the loop shuts down
            call.error = KeyboardInterrupt() if call.cancelled else ClosedError(
                "the toh_nb portal loop is stopping; create a new Hub to continue")
            _release(call)
            return
        try:
            value = call.fn(*call.args)
        except BaseException as error:  # handed to the caller, re-raised there
            call.error = error
            _release(call)
            return
        if not inspect.isawaitable(value):
            call.value = value
            _release(call)
            return
        if _EAGER and inspect.iscoroutine(value):
            task = asyncio.Task(value, loop=self.loop, eager_start=True)
        else:
            task = asyncio.ensure_future(value, loop=self.loop)
        call.task = task
        if task.done():
            self._task_done(call, task)
        else:
            task.add_done_callback(lambda t, call=call: self._task_done(call, t))

    def _task_done(self, call: _Call, task: asyncio.Future) -> None:
        if task.cancelled():
            if call.cancelled:
                call.error = KeyboardInterrupt()
            elif self._stopping:
                call.error = ClosedError("the toh_nb portal loop was stopped while this call was running")
            else:  # cancelled on the loop by something else: never a bare CancelledError at a cell
                call.error = TohError(f"{_name_of(call.fn)} was cancelled on the hub's event loop before it "
                                      "finished; what it started may still be running (see hub.agents())")
        else:
            error = task.exception()
            if error is not None:
                call.error = error
            else:
                call.value = task.result()
        _release(call)

    def _cancel_call(self, call: _Call) -> None:
        task = call.task
        if task is not None and not task.done():
            task.cancel()

    # -- callers ---------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return not self._closed

    def in_portal_thread(self) -> bool:
        return threading.get_ident() == self.thread_id

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the loop and block until it is done; an awaitable result is awaited.

        Raises what ``fn`` raised; :class:`UsageError` when called from the loop thread itself;
        :class:`ClosedError` when the portal is stopped. A ``KeyboardInterrupt`` while waiting cancels
        the work on the loop (waiting up to ``CANCEL_GRACE`` seconds for it to land) and re-raises.
        """
        if threading.get_ident() == self.thread_id:
            raise UsageError(GUARD_MESSAGE)
        if self._closed:
            raise ClosedError("the toh_nb portal loop is stopped; create a new Hub to continue")
        warn_if_blocking_a_loop()  # inside a script's async def this call freezes the caller's loop
        call = _Call(fn, args)
        pending = self._pending
        pending.add(call)
        try:
            self.loop.call_soon_threadsafe(self._start_call, call)
        except RuntimeError:  # the loop closed between the check and the submit
            pending.discard(call)
            raise ClosedError("the toh_nb portal loop is stopped; create a new Hub to continue") from None
        lock = call.lock
        try:
            # A timed wait, re-armed: should a signal land on another thread, its Python handler still
            # runs here within POLL seconds (a wait on the main thread itself is interrupted at once).
            # Between two waits the registered wait hooks run (the tree's clicks on ipykernel 6).
            while not lock.acquire(timeout=POLL):
                if _WAIT_HOOKS:
                    _run_wait_hooks()
        except KeyboardInterrupt:
            call.cancelled = True
            try:
                self.loop.call_soon_threadsafe(self._cancel_call, call)
            except RuntimeError:
                pass
            call.lock.acquire(timeout=CANCEL_GRACE)
            raise
        finally:
            pending.discard(call)
        error = call.error
        if error is not None:
            call.error = None
            try:
                raise error
            finally:
                error = None
        return call.value

    def submit(self, fn: Callable[..., Any], *args: Any) -> "concurrent.futures.Future":
        """Run ``fn(*args)`` on the loop without waiting; a ``concurrent.futures.Future`` of its result.

        For callbacks that must not block (widget buttons). Safe from any thread, the loop's included.
        """
        if self._closed:
            raise ClosedError("the toh_nb portal loop is stopped; create a new Hub to continue")
        future: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            if not future.set_running_or_notify_cancel():
                return
            if self._closed:
                future.set_exception(ClosedError("the toh_nb portal loop is stopping; the work was not started"))
                return
            _start_into(future, self.loop, fn, args)

        try:
            self.loop.call_soon_threadsafe(start)
        except RuntimeError:
            raise ClosedError("the toh_nb portal loop is stopped; create a new Hub to continue") from None
        return future

    # -- users and shutdown ------------------------------------------------------------------------

    def register_closer(self, key: int, closer: Callable[[], Any]) -> None:
        """``closer()`` (sync, or returning an awaitable) runs on the loop when the portal stops."""
        self._closers[key] = closer

    def unregister_closer(self, key: int) -> None:
        self._closers.pop(key, None)

    def add_user(self) -> None:
        """Count one more hub using this portal (:meth:`release` uncounts it; the last one stops it)."""
        self._users += 1

    def release(self) -> None:
        """One user (hub) is done; the last one stops the portal."""
        with _LOCK:
            self._users = max(0, self._users - 1)
            last = self._users == 0
            if last:
                self._closed = True
                global _CURRENT
                if _CURRENT is self:
                    _CURRENT = None
        if last:
            self.stop()

    async def _shutdown(self) -> None:
        closers = list(self._closers.values())
        self._closers.clear()
        for closer in closers:
            try:
                value = closer()
                if inspect.isawaitable(value):
                    await asyncio.wait_for(value, STOP_TIMEOUT)
            except Exception:  # best effort: a failing close must not keep the loop alive
                pass
        self.loop.stop()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Close the registered hubs, cancel what is left on the loop, stop and join the thread.

        Idempotent. From the loop thread itself the stop is scheduled and not waited for.
        """
        with _LOCK:
            self._closed = True
            global _CURRENT
            if _CURRENT is self:
                _CURRENT = None
            if self._stopping:
                first = False
            else:
                self._stopping = first = True
        if first:
            try:
                self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._shutdown()))
            except RuntimeError:  # already closed
                pass
        if threading.get_ident() != self.thread_id:
            self._finished.wait(timeout)

    @property
    def users(self) -> int:
        """How many hubs use this portal (the last to release it stops it)."""
        return self._users

    def waiting(self) -> list[Callable[..., Any]]:
        """The functions of the calls in flight (a caller blocked in :meth:`call`, or a :meth:`submit`
        not finished yet), as submitted: a diagnostic of what the loop is busy with."""
        return [call.fn for call in list(self._pending)]

    def __repr__(self) -> str:
        return f"Portal({self.name}, {'running' if self.running else 'stopped'}, users={self._users})"


#: callables run by a caller blocked in :meth:`Portal.call`, on its own thread, every POLL seconds
_WAIT_HOOKS: list[Callable[[], Any]] = []


def on_wait(hook: Callable[[], Any]) -> None:
    """Run ``hook()`` every ``POLL`` seconds while a sync call waits for the portal, on the waiting
    thread (once per hook; the notebook layer serves the tree's clicks there on kernels without
    subshells). A hook must be quick and must not raise: an exception is logged and dropped."""
    if hook not in _WAIT_HOOKS:
        _WAIT_HOOKS.append(hook)


def wait_hooks() -> list[Callable[[], Any]]:
    """The hooks :func:`on_wait` registered, in the order they run."""
    return list(_WAIT_HOOKS)


def current_portal() -> "Portal | None":
    """The process's shared portal if one runs, without starting one (:func:`get_portal` starts it)."""
    return _CURRENT


def _run_wait_hooks() -> None:
    for hook in list(_WAIT_HOOKS):
        try:
            hook()
        except Exception:  # a hook never breaks the call that waits
            logging.getLogger("toh_nb").exception("toh_nb: a portal wait hook failed")


def _name_of(fn: Callable[..., Any]) -> str:
    """How a submitted call is named in an error: its function's name (``spawn``, ``run`` …)."""
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", None)
    return f"the call {name}()" if name else "the call"


def _release(call: _Call) -> None:
    if not call.finished:
        call.finished = True
        call.lock.release()


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.wait(tasks, timeout=STOP_TIMEOUT))


# -- the process-wide portal --------------------------------------------------------------------

_LOCK = threading.Lock()
_CURRENT: Portal | None = None


def get_portal() -> Portal:
    """The running process-wide portal, started on first use."""
    global _CURRENT
    portal = _CURRENT
    if portal is not None and portal.running:
        return portal
    with _LOCK:
        if _CURRENT is None or not _CURRENT.running:
            _CURRENT = Portal()
        return _CURRENT


def acquire() -> Portal:
    """The running portal, counted as used by one more hub (pair with :meth:`Portal.release`)."""
    global _CURRENT
    with _LOCK:
        if _CURRENT is None or not _CURRENT.running:
            _CURRENT = Portal()
        _CURRENT.add_user()
        return _CURRENT


def call(coro_fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``coro_fn(*args)`` on the process-wide portal and block for its result."""
    return get_portal().call(coro_fn, *args)


def submit(coro_fn: Callable[..., Any], *args: Any) -> "concurrent.futures.Future":
    """Start ``coro_fn(*args)`` on the process-wide portal without waiting."""
    return get_portal().submit(coro_fn, *args)


def stop(timeout: float = STOP_TIMEOUT) -> None:
    """Stop the process-wide portal (its hubs are closed first). A later call starts a fresh one."""
    portal = _CURRENT
    if portal is not None:
        portal.stop(timeout)


def in_portal_thread() -> bool:
    portal = _CURRENT
    return portal is not None and portal.in_portal_thread()


atexit.register(stop)


# -- Hub(loop="kernel") ---------------------------------------------------------------------------


class KernelRunner:
    """Runs a hub on the caller's own event loop through ``nest_asyncio2`` (``Hub(loop="kernel")``).

    An explicit opt-in, never applied implicitly. ``nest_asyncio2.apply()`` (the maintained fork of the
    archived ``nest_asyncio``, which ipykernel itself depends on) patches the loop so that
    ``run_until_complete`` can re-enter it from a cell that already runs inside it. Limits, as
    re-checked on nest-asyncio2 1.7.4 with ipykernel 7.4.0 (Python 3.11 and 3.13):

    - the patch is process-wide and cannot be undone (the fork has no ``unapply``): every asyncio
      loop of the process becomes re-entrant, and on Python < 3.14 asyncio's C ``Task`` and
      ``Future`` are replaced by the slower pure-Python ones;
    - it cannot patch uvloop (``ValueError: Can't patch loop of type <class 'uvloop.Loop'>``) or any
      loop that is not an ``asyncio.BaseEventLoop``: such a loop is refused with a UsageError;
    - ipykernel >= 7 runs its message handling as tasks in per-message contexts, and a public report
      (inspect_ai issue 4530, against nest_asyncio2) describes kernels corrupted by nested runs there
      (``cannot enter context``); toh_nb's real-kernel test of this mode, and nested ``asyncio.run``
      in cells, ran clean on ipykernel 7.4.0, but the risk stays with this mode;
    - background children only make progress while the kernel's loop runs: between cells and during
      facade calls, **not** while a cell runs long synchronous code (``time.sleep``);
    - only the thread that owns the loop may call the hub.

    (The archived ``nest_asyncio`` broke ``asyncio.current_task()`` on Python 3.14; the fork keeps
    asyncio's C Task there to avoid that. toh_nb supports Python 3.11-3.13 and has not run on 3.14.)

    Prefer the default ``loop="portal"``. Use this mode only when the engine must share the kernel's
    loop (for example with loop-bound objects created in the kernel).
    """

    name = "kernel"

    def __init__(self) -> None:
        import nest_asyncio2

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:
                loop = None
            if loop is None or loop.is_closed():
                loop = asyncio.new_event_loop()
                asyncio.set_event_loop(loop)
        if type(loop).__module__.split(".")[0] not in ("asyncio",):
            raise UsageError(f'Hub(loop="kernel") needs a standard asyncio loop; nest_asyncio2 cannot patch '
                             f'{type(loop).__module__}.{type(loop).__name__} (use the default loop="portal")')
        nest_asyncio2.apply(loop)
        self.loop = loop
        self.thread_id = threading.get_ident()
        self._closed = False

    @property
    def running(self) -> bool:
        return not self._closed and not self.loop.is_closed()

    def in_portal_thread(self) -> bool:
        return False  # re-entry is what nest_asyncio2 allows

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if threading.get_ident() != self.thread_id:
            raise UsageError('a Hub(loop="kernel") can only be used from the thread that owns its event loop')
        if not self.running:
            raise ClosedError("the hub's event loop is closed; create a new Hub to continue")
        value = fn(*args)
        if not inspect.isawaitable(value):
            return value
        task = asyncio.ensure_future(value, loop=self.loop)
        try:
            return self.loop.run_until_complete(task)
        except KeyboardInterrupt:
            task.cancel()
            raise

    def submit(self, fn: Callable[..., Any], *args: Any) -> "concurrent.futures.Future":
        """Start ``fn(*args)`` on the loop without waiting. Safe from any thread: a widget click handled
        on a kernel subshell's thread hands its work to the loop, which runs it the next time the
        loop runs (between cells, or while a facade call runs it)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_running_or_notify_cancel()
        if threading.get_ident() == self.thread_id:
            _start_into(future, self.loop, fn, args)
            return future
        try:
            self.loop.call_soon_threadsafe(_start_into, future, self.loop, fn, args)
        except RuntimeError:
            raise ClosedError("the hub's event loop is closed; create a new Hub to continue") from None
        return future

    def register_closer(self, key: int, closer: Callable[[], Any]) -> None:
        pass

    def unregister_closer(self, key: int) -> None:
        pass

    def release(self) -> None:
        self._closed = True

    def __repr__(self) -> str:
        return f"KernelRunner({'running' if self.running else 'stopped'})"


def _start_into(future: "concurrent.futures.Future", loop: asyncio.AbstractEventLoop, fn: Callable[..., Any],
                args: tuple) -> None:
    """On the loop thread: call ``fn(*args)`` and settle ``future`` with its value, awaited if need be
    (what both fire-and-forget ``submit`` paths share)."""
    try:
        value = fn(*args)
    except BaseException as error:
        future.set_exception(error)
        return
    if not inspect.isawaitable(value):
        future.set_result(value)
        return
    asyncio.ensure_future(value, loop=loop).add_done_callback(functools.partial(_settle_future, future))


def _settle_future(future: "concurrent.futures.Future", task: asyncio.Future) -> None:
    if task.cancelled():
        future.set_exception(ClosedError("the work was cancelled before it finished"))
    elif task.exception() is not None:
        future.set_exception(task.exception())
    else:
        future.set_result(task.result())
