"""The JSONL store's writer thread: every write, fsync and log creation of one store happens here.

Why a thread: the event loop that drives the agents is shared by every hub of the process, so a slow
or stalled disk (a busy network file system, an fsync queued behind other writers, a full disk
being retried) must delay only the log, never the loop. The loop thread hands each operation to a
queue and returns at once; one thread per store drains the queue in order. Draining in batches
also makes the log cheap: the events queued for one session while the thread was busy reach the
file with one ``write()``, and a newly created log is written together with the events that
followed it in the same batch. Serialization (``Event.to_json`` and the JSON encoder) happens here
too, off the loop thread. Once the store has created a log, the thread keeps a few *spare* files
ready (made while nothing is queued): anonymous ``O_TMPFILE`` inodes in the store directory, with no
name until a new log is written into one and linked to its own, so the slow step of creating a file
(allocating an inode) is not between a new child's first turn and its acknowledgement, and a crash
leaves nothing behind. Spares count against ``max_open``.

Acknowledgement is explicit: :meth:`LogWriter.barrier` queues a marker and calls back once every
operation queued before it has been handled: written (policies ``batch``/``never``) or written and
``fdatasync``-ed (``always``), or failed. A failed write keeps the session's unwritten events in a
backlog, in order; the session's barriers fail with the same :class:`~toh_nb.core.errors.StoreError`
(naming the file and the OS error) until a retry succeeds. A backlog is retried only when that
session is written or acknowledged again (or the store is flushed or closed), never because another
log was written: nothing reaches a log behind its caller's back once space is freed.

A barrier may name the *records* it acknowledges (what ``start``, ``send`` and ``kill`` wrote): when
it fails, those records leave the backlog at once, on this thread, before anything could retry them,
so a call that raised leaves nothing on disk; a failed barrier naming a log whose creation is still in
the backlog drops that whole log (its id is free again: :meth:`LogWriter.dropped`).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from json.encoder import c_make_encoder, encode_basestring_ascii
from queue import Empty, SimpleQueue
from typing import Any, Callable

from ..core.content import message_to_json
from ..core.errors import StoreError
from ..core.session import Event

__all__ = ["LogWriter", "LoopAck", "encode", "encode_event", "resolve_all"]

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)
#: the C encoder behind ``_ENCODER`` built once, without its circular-reference bookkeeping: what a
#: line costs is mostly the Python around the C call (see :func:`encode_event`); None without ``_json``
_C_ENCODE = (c_make_encoder(None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", False, False, True)
             if c_make_encoder is not None and encode_basestring_ascii is not None else None)
_float_repr = float.__repr__

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | _O_NOFOLLOW | _O_CLOEXEC
CREATE_FLAGS = WRITE_FLAGS | os.O_CREAT | os.O_EXCL
_NO_HARDLINKS = {e for e in (errno.EPERM, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", None),
                             getattr(errno, "ENOSYS", None), errno.EMLINK) if e is not None}

SUFFIX = ".jsonl"
TMP_PREFIX = "."
TMP_SUFFIX = ".jsonl.tmp"
#: how many spares the writer keeps ready once the store has created a log (at most half of ``max_open``)
SPARES = 8
#: an anonymous file in the store directory (Linux ``O_TMPFILE``; 0 elsewhere: no spares)
SPARE_FLAGS = (os.O_WRONLY | os.O_APPEND | _O_CLOEXEC | getattr(os, "O_TMPFILE", 0)
               if hasattr(os, "O_TMPFILE") else 0)

# queue item kinds (the first element of each tuple)
_CREATE, _APPEND, _BARRIER, _REPAIR, _FORGET, _STOP = range(6)

Done = Callable[["StoreError | None"], None]

#: answered acknowledgements of one loop delivered together (one wake-up) while a batch goes on: the
#: first turns of a large batch resume while the writer writes the rest (``always``: each at once)
DELIVER_EVERY = 16
#: how often a busy writer looks for events queued without an acknowledgement (seconds); after a
#: whole poll with nothing queued it sleeps until the next queued item wakes it (no idle wake-ups)
POLL = 0.02
#: a background pass of the ``batch`` policy with at least this many logs to sync syncs the store's
#: file system once (``syncfs``, Linux) instead of ``fdatasync``-ing each log (see ``LogWriter._sync_file_system``)
SYNCFS_AT = 8
#: a queue this long wakes the writer at once (bounds the memory of a long turn's unwritten events)
_EAGER_QUEUE = 256


def encode(record: dict) -> bytes:
    """One compact, ASCII, newline-terminated JSON line (``\\n`` inside strings is escaped).

    A dict goes straight to the pre-built C encoder; if that refuses it (content that is not JSON,
    a circular reference), ``JSONEncoder.encode`` runs instead, so the error is the usual one.
    """
    if _C_ENCODE is not None and type(record) is dict:
        try:
            return (_C_ENCODE(record, 0)[0] + "\n").encode("ascii")
        except Exception:
            pass
    return (_ENCODER.encode(record) + "\n").encode("ascii")


def encode_event(event: Any) -> bytes:
    """``encode(event.to_json())``, byte for byte, with less Python in between.

    Why: the writer encodes every event of every log (about nine per delegation) while the event
    loop waits for the acknowledgement, holding the GIL throughout; building the line's fixed fields
    directly and the message/data through the pre-built C encoder costs ~35 % less per event
    (measured 26.4 -> 16.7 us for a delegation's eight events). Anything unusual (a non-finite
    time, a turn that is not an int, content the encoder refuses, a circular reference) takes the
    ordinary path, so the line, or the error, is exactly what :func:`encode` gives.
    """
    seq, time_, turn = event.seq, event.time, event.turn
    if (_C_ENCODE is not None and type(event) is Event and type(seq) is int and type(time_) is float
            and time_ - time_ == 0.0 and (turn is None or type(turn) is int)):
        try:
            line = f'{{"seq":{seq},"kind":{encode_basestring_ascii(event.kind)},"time":{_float_repr(time_)}'
            if turn is not None:
                line += f',"turn":{turn}'
            message = event.message
            if message is not None:
                line += ',"message":' + _C_ENCODE(message_to_json(message), 0)[0]
            data = event.data
            if data is not None:
                line += ',"data":' + _C_ENCODE(data, 0)[0]
            return (line + "}\n").encode("ascii")
        except Exception:  # recursion, content that is not JSON: the ordinary path says what is wrong
            pass
    return (_ENCODER.encode(event.to_json()) + "\n").encode("ascii")


class LoopAck:
    """A barrier's answer that resolves ``future`` on its event loop (what
    :meth:`~toh_nb.store.jsonl.JsonlStore.acknowledged` awaits). The writer resolves every one
    it answered in a batch with one wake-up per loop (:meth:`LogWriter._deliver`); called directly,
    it resolves this one alone."""

    __slots__ = ("loop", "future")

    def __init__(self, loop: Any, future: Any) -> None:
        self.loop = loop
        self.future = future

    def __call__(self, error: "StoreError | None") -> None:
        resolve_on(self.loop, [(self.future, error)])


def resolve_on(loop: Any, resolved: list) -> None:
    """From the writer's thread: settle ``resolved`` on ``loop`` with one wake-up of its thread."""
    try:
        loop.call_soon_threadsafe(resolve_all, resolved)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


def resolve_all(resolved: list) -> None:
    """On the event loop: settle each ``(future, error)`` not already done (e.g. cancelled)."""
    for future, error in resolved:
        if not future.done():
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)


def datasync(fd: int) -> None:
    """``fdatasync`` where there is one (a module-level seam so tests can count or fail syncs)."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _load_syncfs() -> "Callable[[int], int] | None":
    """``syncfs(2)`` from the C library (Linux; Python's ``os`` has no binding), or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


SYNCFS = _load_syncfs()


def syncfs(fd: int) -> bool:
    """Sync the whole file system that holds ``fd``; ``False`` where that is not available or failed
    (a module-level seam so tests can count or fail it). ctypes releases the GIL for the call."""
    return SYNCFS is not None and SYNCFS(fd) == 0


def write_all(fd: int, data: bytes) -> None:
    """``write()`` until every byte is out; an error carries how many bytes did go out."""
    view = memoryview(data)
    written = 0
    while written < len(data):
        try:
            written += os.write(fd, view[written:])
        except OSError as error:
            error.toh_written = written  # type: ignore[attr-defined]
            raise


def publish(tmp: str, name: str, dir_fd: int) -> None:
    """Give the complete temporary log its final name, never replacing an existing file."""
    try:
        # link, not rename: fails with EEXIST instead of replacing a file that appeared behind our back
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as error:
        if error.errno not in _NO_HARDLINKS:
            raise
        # a file system without hard links (vfat, some network mounts): check, then rename
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return
        raise FileExistsError(errno.EEXIST, "file exists", name) from None
    os.unlink(tmp, dir_fd=dir_fd)


def link_spare(fd: int, name: str, dir_fd: int) -> None:
    """Give an anonymous (``O_TMPFILE``) file its name; ``FileExistsError`` if the name is taken."""
    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)


class LogWriter:
    """The queue and thread that write one store directory (see the module docstring).

    Created by :class:`~toh_nb.store.jsonl.JsonlStore`; every method except the ``_``-prefixed ones
    is called from other threads (the loop's or a synchronous caller's) and only queues work. The
    public attributes ``spares``, ``open_fds``, ``spares_work`` and ``idle`` are the writer thread's
    state: other threads only read them (diagnostics, tests), never change them.
    """

    def __init__(self, directory: str, dir_fd: int, fsync: str, batch_interval: float, max_open: int) -> None:
        self.directory = directory
        self.fsync = fsync
        self.batch_interval = batch_interval
        self.max_open = max_open
        self._dir_fd = dir_fd
        self._queue: deque = deque()
        # a wake-up token per acknowledgement: SimpleQueue.put never blocks the loop thread (a
        # threading.Event's condition lock is contended by the waiting thread: measured ms under load)
        self._wake: SimpleQueue = SimpleQueue()
        #: the thread is asleep without a timeout (nothing was queued for a whole poll): the next
        #: lazily queued item wakes it (see ``_run``)
        self.idle = False
        self._pid = os.getpid()
        # state below is touched only by the writer thread
        self.open_fds: OrderedDict[str, int] = OrderedDict()  # LRU of append descriptors
        self._dirty: set[str] = set()  # written since their last sync
        self._dir_dirty = False  # a log was created since the last directory sync
        self._last_sync = time.monotonic()
        self._repair: dict[str, tuple] = {}
        self._backlog: dict[str, list] = {}  # id -> queued items that could not be written yet
        self._faults: dict[str, StoreError] = {}  # id -> why its backlog is not written (sticky)
        self._once: dict[str, StoreError] = {}  # id -> an error for its next barrier only
        self._unencodable: dict[str, dict[int, StoreError]] = {}  # id -> id(event) -> why it was not written
        self._created: set[str] = set()  # logs whose file exists (written by this writer)
        self._refused: dict[str, StoreError] = {}  # logs whose name was taken behind our back
        self.leftover: list[str] = []  # ids whose events were still unwritten when the thread stopped
        self._answers: dict[Any, list] = {}  # event loop -> [(future, error)] answered, not yet delivered
        self.spares: deque[int] = deque()  # descriptors of anonymous files ready to become logs
        self.spares_work = bool(SPARE_FLAGS)  # off for good after a spare could not be made or linked
        #: ``batch``: fsyncs run on a second thread, so a slow sync never delays a write or an acknowledgement
        self._syncer = _Syncer(self) if fsync == "batch" else None
        self._thread = threading.Thread(target=self._run, name=f"toh_nb store writer {directory}", daemon=True)
        self._thread.start()

    # -- queueing (any thread) -----------------------------------------------------------------

    def _submit(self, item: tuple) -> None:
        self._queue.append(item)
        self._wake.put(None)

    def _queue_lazily(self, item: tuple) -> None:
        """Queue without waking a busy thread: the next acknowledgement (every turn ends with one) or
        the thread's next poll (``POLL`` seconds) takes it. One wake-up per turn instead of one per
        event keeps the writer from contending with the loop thread for the GIL mid-turn. A thread
        asleep for want of work (``idle``) is woken, so nothing queued waits longer than a poll."""
        queue = self._queue
        queue.append(item)
        if self.idle or len(queue) == _EAGER_QUEUE:
            self._wake.put(None)

    def create(self, session: Any, seed: list) -> None:
        # lazy like an append: with spares made ahead, creating a log is a write and a link, and
        # a wake-up here would only make the writer contend with the loop mid-turn
        self._queue_lazily((_CREATE, session, seed))

    def append(self, session: Any, event: Any) -> None:
        queue = self._queue  # _queue_lazily inlined: this runs for every event on the loop thread
        queue.append((_APPEND, session, event))
        if self.idle or len(queue) == _EAGER_QUEUE:
            self._wake.put(None)

    def repair(self, session_id: str, repair: tuple) -> None:
        """What the next append to a log read from disk must do first (drop a torn tail, add a newline)."""
        self._submit((_REPAIR, session_id, repair))

    def forget(self, session_id: str) -> None:
        """Drop whatever of this session is still unwritten (a refused synchronous ``create``)."""
        self._submit((_FORGET, session_id))

    def barrier(self, session_id: str | None, done: Done, sync: bool = False, records: Any = None) -> None:
        """Call ``done(error_or_None)`` (on the writer thread) once everything queued before is handled.

        ``session_id`` narrows the error to one session (``None``: any session's); ``sync`` also
        fsyncs (that session's log, or all) first, whatever the policy. ``records``: the events of
        ``session_id`` this barrier acknowledges (see the module docstring): when it fails they are
        never written.
        """
        self._submit((_BARRIER, session_id, done, sync, records))

    def dropped(self, session_id: str) -> bool:
        """Whether the log of ``session_id`` was never created (asked after a failed barrier naming
        its records: its creation was dropped with them, and its id is free)."""
        return session_id not in self._created and session_id not in self._backlog

    def wait(self, session_id: str | None, sync: bool = False, records: Any = None) -> None:
        """Block the calling thread until :meth:`barrier` answers; raise its error."""
        if threading.current_thread() is self._thread:  # pragma: no cover - a bug, never a deadlock
            raise StoreError("the store writer cannot wait for itself")
        answered = threading.Event()
        box: list = []

        def done(error: "StoreError | None") -> None:
            box.append(error)
            answered.set()

        self.barrier(session_id, done, sync, records)
        answered.wait()
        if box[0] is not None:
            raise box[0]

    def stop(self) -> None:
        """Handle everything queued (one last retry of any backlog), sync unless ``never``, close
        the descriptors and end the thread. In a forked child (no thread there) it only closes."""
        if os.getpid() != self._pid:
            return
        if threading.current_thread() is self._thread:  # the store was collected on this thread
            self._submit((_STOP,))
            return
        if self._thread.is_alive():
            self._submit((_STOP,))
            self._thread.join()

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        queue = self._queue
        wake = self._wake
        while True:
            if not queue:
                try:
                    wake.get(timeout=POLL)
                except Empty:
                    self._sleep_until_queued()
                while not wake.empty():  # tokens for items about to be drained below
                    wake.get_nowait()
                if not queue:
                    continue
            items = []
            while queue:
                items.append(queue.popleft())
            try:
                stop = self._process(items)
            except Exception as error:  # a bug must not leave every later acknowledgement hanging
                stop = self._failed(items, error)
            del items  # hold no session (and so no store) while idle: an abandoned store is collected
            if stop:
                return
            if self._created and self.spares_work:
                try:
                    self._make_spares()
                except Exception:  # pragma: no cover - a bug here must not end the writer
                    self.spares_work = False

    def _sleep_until_queued(self) -> None:
        """After a whole poll with nothing queued, wait for a wake-up token without a timeout.

        Why: a hub left open in a notebook for hours would otherwise wake this thread ``1 / POLL``
        times a second for nothing. The flag is raised *before* the queue is looked at, and a lazy
        queuer appends *before* it reads the flag, so an item queued at any moment is either seen
        here or followed by a token (a token left over wakes one spare pass, nothing more).
        """
        self.idle = True
        try:
            if not self._queue:
                self._wake.get()
        finally:
            self.idle = False

    def _process(self, items: list) -> bool:
        groups: dict[str, list] = {}
        waiting: dict[str | None, list] = {}  # barriers by session (None: the whole store)
        stop = False
        for item in items:
            kind = item[0]
            if kind == _APPEND or kind == _CREATE:
                session_id = item[1].header.id
                group = groups.get(session_id)
                if group is None:
                    groups[session_id] = [item]
                else:
                    group.append(item)
            elif kind == _BARRIER:
                waiting.setdefault(item[1], []).append(item)
            elif kind == _REPAIR:
                self._repair[item[1]] = item[2]
            elif kind == _FORGET:
                self._refused.pop(item[1], None)
                groups.pop(item[1], None)
                self._backlog.pop(item[1], None)
                self._faults.pop(item[1], None)
            else:
                stop = True
        # retry what a failure left behind, for the sessions written or acknowledged now (all of them
        # for a store-wide barrier: a flush or close), never for another session's sake
        retry = self._backlog.keys() if None in waiting else self._backlog.keys() & (groups.keys() | waiting.keys())
        for session_id in list(retry):
            groups.setdefault(session_id, [])
        for session_id, group in groups.items():
            self._write(session_id, group)
            barriers = waiting.pop(session_id, None)
            if barriers:  # answered at once (under "always" after its sync), delivered in groups
                self._answer(session_id, barriers)
        for session_id, barriers in waiting.items():
            self._answer(session_id, barriers)
        # the rest last: the woken loop thread then does not wait for the GIL while this one works on
        self._deliver()
        if stop:
            self._shutdown()
        return stop

    def _deliver(self) -> None:
        """Resolve the answered acknowledgements: one ``call_soon_threadsafe`` per event loop.

        Why: each call wakes the loop's thread, which then contends with this one for the GIL;
        the acknowledgements of turns that ended while the writer was busy share a wake-up, in
        groups of ``DELIVER_EVERY`` so the first turns of a large batch resume while the writer
        writes the rest (measured with ``continuable_jsonl``: delivering only at the end of the
        batch was slower than one wake-up per acknowledgement, groups of 16 faster than both).
        """
        answers = self._answers
        if not answers:
            return
        self._answers = {}
        for loop, resolved in answers.items():
            resolve_on(loop, resolved)

    def _failed(self, items: list, error: Exception) -> bool:
        """Answer every acknowledgement of a batch the writer could not handle; keep running."""
        failure = StoreError(f"the store writer of {self.directory} failed: {type(error).__name__}: {error}")
        self._deliver()  # answers given before the failure stand (a resolved future keeps its first result)
        stop = False
        for item in items:
            if item[0] == _BARRIER:
                try:
                    item[2](failure)
                except Exception:  # pragma: no cover
                    pass
            elif item[0] == _STOP:
                stop = True
        if stop:
            self._shutdown()
        return stop

    def _answer(self, session_id: str | None, barriers: list) -> None:
        for _, _, done, sync, records in barriers:
            if sync:
                self._sync_all(session_id)
            elif self.fsync == "always":  # group commit: one sync per log that owes an acknowledgement
                if session_id is None:
                    self._sync_all(None)
                else:
                    self._sync_dir_quietly()  # a log created since the last sync: its name too
                    if session_id in self._dirty:
                        self._sync_quietly(session_id)
            if records is not None and session_id is not None:
                error = self._records_answer(session_id, records)
            elif session_id is None:
                error = next(iter(self._faults.values()), None) or self._pop_any_once()
            else:
                self._unencodable.pop(session_id, None)  # told to the barrier that follows them
                error = (self._faults.get(session_id) or self._once.pop(session_id, None)
                         or self._once.pop("", None))
            if type(done) is LoopAck:
                answered = self._answers.get(done.loop)
                if answered is None:
                    answered = self._answers[done.loop] = [(done.future, error)]
                else:
                    answered.append((done.future, error))
                if len(answered) >= DELIVER_EVERY or self.fsync == "always":  # see DELIVER_EVERY
                    self._deliver()
                continue
            try:
                done(error)
            except Exception:  # pragma: no cover - a callback must never kill the writer
                pass

    def _records_answer(self, session_id: str, records: Any) -> "StoreError | None":
        """The answer of a barrier that names the records it acknowledges; when it fails, take them
        out of the backlog (all of the log when its creation is still there) so no retry writes them.

        Only what concerns those records fails it: an earlier event of the log that could not be
        encoded, or a sync that failed, is left for the barrier of the turn it belongs to."""
        refused = self._refused.get(session_id)
        if refused is not None:
            return refused
        unencodable = self._unencodable.get(session_id)
        if unencodable:
            for event in records:
                error = unencodable.pop(id(event), None)
                if error is not None:
                    if self._once.get(session_id) is error:
                        del self._once[session_id]
                    return error
        error = self._faults.get(session_id)
        if error is None:
            if self.fsync == "always" and session_id in self._dirty:  # its sync failed: not acknowledged
                return self._once.pop(session_id, None) or StoreError(
                    f'cannot sync session log "{session_id}" ({self._path(session_id)})')
            return None
        backlog = self._backlog.get(session_id, [])
        if backlog and backlog[0][0] == _CREATE and session_id not in self._created:
            self._backlog.pop(session_id, None)  # never created: the whole log goes, its id is free
            self._faults.pop(session_id, None)
            self._repair.pop(session_id, None)
            return error
        gone = {id(event) for event in records}
        kept = [item for item in backlog if item[0] != _APPEND or id(item[2]) not in gone]
        if kept:
            self._backlog[session_id] = kept
        else:  # nothing else of the log is unwritten: its later writes need not wait for a retry
            self._backlog.pop(session_id, None)
            self._faults.pop(session_id, None)
        return error

    def _pop_any_once(self) -> "StoreError | None":
        if not self._once:
            return None
        return self._once.pop(next(iter(self._once)))

    def _sync_file_system(self, logs: int) -> bool:
        """With at least ``SYNCFS_AT`` logs to sync, sync the store's whole file system once first;
        whether that was done.

        Why: on a journalling file system each ``fdatasync`` of a new log commits the journal and
        flushes the disk's cache on its own; a burst of new children made one ``batch`` pass of one
        sync per log (measured 25-50 ms for 150 new logs on this machine's ext4, +106 us of kernel
        time per delegation, ~2,000 delegations/s), where one ``syncfs`` commits them all at once
        (1.2-1.7 ms for the same 150), and each log's own sync after it is cheap (7.7-8.1 ms for the
        150). The price: it also writes back whatever else is dirty on that file system, so a few
        logs keep to per-log syncs."""
        return logs >= SYNCFS_AT and syncfs(self._dir_fd)

    def sync_files(self, pending: set[str], sync_dir: bool, report: bool) -> None:
        """fdatasync the named logs (and the directory) through descriptors of its own; with ``report`` a
        failure is kept for the next acknowledgement. Called by the batch syncer's thread and on flush.

        Many logs are synced through their file system first (:meth:`_sync_file_system`): then the
        syncer's background pass, which reports nothing, is done; a flush still syncs each log, to
        report each failure. Where there is no ``syncfs`` or it fails, each log is synced."""
        if self._sync_file_system(len(pending)) and not report:
            return
        if sync_dir:
            try:
                os.fsync(self._dir_fd)
            except OSError as error:
                if report:
                    self._once.setdefault("", StoreError(f"cannot sync store directory {self.directory}: {error}"))
        for session_id in pending:
            try:
                fd = os.open(session_id + SUFFIX, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=self._dir_fd)
            except FileNotFoundError:
                continue  # removed from outside since it was written: nothing left to sync
            except OSError as error:
                if report:
                    self._once[session_id] = StoreError(
                        f'cannot sync session log "{session_id}" ({self._path(session_id)}): {error}')
                continue
            try:
                datasync(fd)
            except OSError as error:
                if report:
                    self._once[session_id] = StoreError(
                        f'cannot sync session log "{session_id}" ({self._path(session_id)}): {error}')
            finally:
                os.close(fd)

    # -- writing -------------------------------------------------------------------------------

    def _path(self, session_id: str) -> str:
        return os.path.join(self.directory, session_id + SUFFIX)

    def _write(self, session_id: str, group: list) -> None:
        """Write a session's pending items (its backlog first)."""
        refused = self._refused.get(session_id)
        if refused is not None:  # its log could never be created: never append to another's file
            self._once[session_id] = refused
            return
        backlog = self._backlog.pop(session_id, None)
        if backlog:
            group = backlog + group
        if not group:
            return
        kept = []
        chunks = []
        create = group[0][0] == _CREATE and session_id not in self._created
        for item in group:
            try:
                if item[0] == _CREATE:
                    if session_id in self._created:
                        continue
                    chunks.append(encode(item[1].header.to_json()))
                    chunks.extend(encode_event(event) for event in item[2])
                else:
                    chunks.append(encode_event(item[2]))
            except Exception as error:  # e.g. TypeError/ValueError: content that is not JSON
                seq = item[2].seq if item[0] == _APPEND else 0
                refused = self._once[session_id] = StoreError(
                    f'cannot store event {seq} of session "{session_id}": {error}')
                if item[0] == _APPEND:
                    self._unencodable.setdefault(session_id, {})[id(item[2])] = refused
                continue  # never written: the log stays parseable without it
            kept.append(item)
        if not chunks:
            return
        data = b"".join(chunks)
        try:
            if create:
                self._create_file(session_id, data)
            else:
                self._append_file(session_id, data)
        except FileExistsError:  # not a passing condition: never retried
            self._faults.pop(session_id, None)
            refused = self._refused[session_id] = StoreError(
                f'session "{session_id}" already exists (file {session_id + SUFFIX})')
            self._once[session_id] = refused
            return
        except OSError as error:
            self._backlog[session_id] = kept
            verb = "create" if create else "append to"
            self._faults[session_id] = StoreError(
                f'cannot {verb} session log "{session_id}" ({self._path(session_id)}): {error}')
            return
        self._faults.pop(session_id, None)
        if self._syncer is not None:
            self._syncer.add(session_id, create)
        elif not (create and self.fsync == "always"):  # else synced before it was published
            self._dirty.add(session_id)

    def _make_spares(self) -> None:
        """Make anonymous files for the next new logs while nothing is queued.

        Why: creating a file (allocating its inode) is by far the slowest step of a new log on some
        disks (measured 10-300 us of kernel time per file on this machine's ext4, depending on the
        directory, against ~10 us to link one), and a new log's first acknowledgement waits for it.
        Made here, between batches, the creation overlaps the event loop's work instead. A spare
        has no name, so nothing shows in the directory and nothing is left after a crash; it holds
        a descriptor, counted against ``max_open`` (the LRU keeps the rest). Any failure (a file
        system without ``O_TMPFILE``, no ``/proc``) turns spares off: logs are then created as before.
        """
        spares = self.spares
        queue = self._queue
        wanted = min(SPARES, self.max_open // 2)
        while len(spares) < wanted and not queue:
            try:
                fd = os.open(".", SPARE_FLAGS, 0o644, dir_fd=self._dir_fd)
            except OSError:
                self.spares_work = False
                return
            spares.append(fd)
            self._evict()

    def _create_file(self, session_id: str, data: bytes) -> None:
        if self.spares:
            fd = self.spares.popleft()
            try:
                write_all(fd, data)
                if self.fsync == "always":
                    datasync(fd)
            except OSError:  # the anonymous file goes with its descriptor; the create is retried
                os.close(fd)
                raise
            try:
                link_spare(fd, session_id + SUFFIX, self._dir_fd)
            except FileExistsError:
                os.close(fd)
                raise
            except OSError:  # e.g. no /proc to link through: create logs the usual way from now on
                os.close(fd)
                self.spares_work = False
                while self.spares:
                    os.close(self.spares.popleft())
            else:
                self._published(session_id, fd)
                return
        self._create_named(session_id, data)

    def _create_named(self, session_id: str, data: bytes) -> None:
        """Write the log to ``.<id>.jsonl.tmp`` and give it its name when complete."""
        dir_fd = self._dir_fd
        name = session_id + SUFFIX
        tmp = TMP_PREFIX + session_id + TMP_SUFFIX
        fd = None
        try:
            try:
                fd = os.open(tmp, CREATE_FLAGS, 0o644, dir_fd=dir_fd)
            except FileExistsError:  # left by a crash or an earlier failed attempt (we hold the lock)
                os.unlink(tmp, dir_fd=dir_fd)
                fd = os.open(tmp, CREATE_FLAGS, 0o644, dir_fd=dir_fd)
            write_all(fd, data)
            if self.fsync == "always":
                datasync(fd)
            publish(tmp, name, dir_fd)
        except OSError:
            if fd is not None:
                os.close(fd)
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
        self._published(session_id, fd)

    def _published(self, session_id: str, fd: int) -> None:
        self._created.add(session_id)
        self._dir_dirty = True
        self._remember_fd(session_id, fd)

    def _append_file(self, session_id: str, data: bytes) -> None:
        fd = self._fd(session_id)
        repair = self._repair.get(session_id)
        if repair is not None:
            if repair[0] == "truncate":
                os.ftruncate(fd, repair[1])
            else:
                data = b"\n" + data
            del self._repair[session_id]
        try:
            write_all(fd, data)
        except OSError as error:
            written = getattr(error, "toh_written", 0)
            if written:
                try:  # drop the partial lines first on the next attempt
                    self._repair[session_id] = ("truncate", os.lseek(fd, 0, os.SEEK_END) - written)
                except OSError:
                    pass
            elif repair is not None and repair[0] == "newline":
                self._repair[session_id] = repair  # the newline did not go out either
            raise
        self._created.add(session_id)

    def _remember_fd(self, session_id: str, fd: int) -> None:
        self.open_fds[session_id] = fd
        self._evict()

    def _evict(self) -> None:
        fds = self.open_fds
        while fds and len(fds) + len(self.spares) > self.max_open:
            _, old = fds.popitem(last=False)
            os.close(old)  # still in _dirty if unsynced: the next sync reopens it

    def _fd(self, session_id: str) -> int:
        fd = self.open_fds.get(session_id)
        if fd is not None:
            self.open_fds.move_to_end(session_id)
            return fd
        fd = os.open(session_id + SUFFIX, WRITE_FLAGS, dir_fd=self._dir_fd)
        self._remember_fd(session_id, fd)
        return fd

    # -- syncing -------------------------------------------------------------------------------

    def _sync_dir_quietly(self) -> None:
        if not self._dir_dirty:
            return
        try:
            os.fsync(self._dir_fd)
            self._dir_dirty = False
        except OSError as error:
            self._once.setdefault("", StoreError(f"cannot sync store directory {self.directory}: {error}"))

    def _sync_quietly(self, session_id: str) -> None:
        fd = self.open_fds.get(session_id)
        try:
            if fd is not None:
                datasync(fd)
            else:  # evicted from the LRU since it was written: fsync through a fresh descriptor
                fd = os.open(session_id + SUFFIX, WRITE_FLAGS, dir_fd=self._dir_fd)
                try:
                    datasync(fd)
                finally:
                    os.close(fd)
        except FileNotFoundError:
            pass  # removed from outside since it was written: nothing left to sync
        except OSError as error:
            self._once[session_id] = StoreError(f'cannot sync session log "{session_id}" '
                                                f"({self._path(session_id)}): {error}")
            return
        self._dirty.discard(session_id)

    def _sync_all(self, session_id: str | None) -> None:
        if self._syncer is not None:
            self._syncer.sync_now(session_id)
            return
        self._sync_dir_quietly()
        if session_id is None:
            self._sync_file_system(len(self._dirty))  # the per-log syncs below are then cheap
            for dirty in list(self._dirty):
                self._sync_quietly(dirty)
            self._last_sync = time.monotonic()
        elif session_id in self._dirty:
            self._sync_quietly(session_id)

    def _shutdown(self) -> None:
        if self._syncer is not None:
            self._syncer.stop()  # its last pass ends first; what is still pending is synced below
        if self.fsync != "never":
            self._sync_all(None)
        self.leftover = sorted(set(self._backlog) | set(self._refused))
        while self.spares:  # anonymous: closing is all it takes
            try:
                os.close(self.spares.popleft())
            except OSError:
                pass
        for fd in self.open_fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self.open_fds.clear()


class _Syncer:
    """The ``batch`` policy's fsync thread: at most every ``batch_interval`` seconds it fdatasyncs the
    logs written since its last pass (through descriptors of its own) and the directory, or syncs
    their file system once when they are many (:meth:`LogWriter.sync_files`).

    Keeping fsync off the writer thread means a slow disk sync (milliseconds per log on a busy
    disk) never delays writes, and so never delays an acknowledgement, which under ``batch`` needs
    only ``write()``. Under sustained load a pass may take longer than the interval: the window a
    machine crash can lose is then one pass long. ``flush()``/``close()`` sync on the writer thread
    through :meth:`sync_now`, after any pass in progress.
    """

    def __init__(self, writer: LogWriter) -> None:
        self._writer = writer
        self._lock = threading.Lock()  # guards _pending and _dir
        self._pass = threading.Lock()  # held while syncing: flush() waits for a pass in progress
        self._pending: set[str] = set()
        self._dir = False
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"toh_nb store syncer {writer.directory}",
                                        daemon=True)
        self._thread.start()

    def add(self, session_id: str, created: bool) -> None:
        with self._lock:
            self._pending.add(session_id)
            self._dir = self._dir or created
        if not self._wake.is_set():
            self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def sync_now(self, session_id: str | None) -> None:
        """Sync now, on the calling thread: one log (and the directory) or everything pending."""
        with self._pass:
            with self._lock:
                if session_id is None:
                    pending, self._pending = self._pending, set()
                else:
                    pending = {session_id} & self._pending
                    self._pending.discard(session_id)
                sync_dir, self._dir = self._dir, False
            self._writer.sync_files(pending, sync_dir, report=True)

    def _run(self) -> None:
        interval = self._writer.batch_interval
        last = time.monotonic()
        while not self._stopping:
            self._wake.wait()
            delay = last + interval - time.monotonic()
            if delay > 0 and not self._stopping:
                time.sleep(min(delay, 0.05))
                continue
            self._wake.clear()
            with self._pass:
                with self._lock:
                    pending, self._pending = self._pending, set()
                    sync_dir, self._dir = self._dir, False
                last = time.monotonic()
                self._writer.sync_files(pending, sync_dir, report=False)
