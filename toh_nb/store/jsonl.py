"""The JSONL session store: one append-only log file per session (``store="dir/"``).

Why our own rather than sqlite3 (measured, issue 45): not speed (sqlite3 in WAL mode with
``synchronous=FULL`` committed a four-event turn in 230-290 µs, this store's create, append and
``flush`` 870-1,560 µs, on this machine under load) but the format: one plain append-only log per
session that a crash can tear only at its last line, that any tool reads, and that a reopen skips
through the listing index.

Layout of a store directory::

    <dir>/.lock                 the writing store's pid (the exclusion is flock on <dir> itself)
    <dir>/<session_id>.jsonl    header line ({"type": "session", ...}), then one event per line
    <dir>/.<session_id>.jsonl.tmp   only while a log is being created (removed on the next scan)
    <dir>/.toh-index.json       the listing index written at close (:mod:`toh_nb.store.index`)

Every line is compact JSON (ASCII, ``\\n``-terminated) and reaches the file with one ``write`` call,
so a crash can tear at most the last line of a log. Reading treats a torn or corrupt *last* line as
the torn tail of an interrupted append: it is ignored (the session loads without it) and
``diagnostic(id)`` returns ``"torn-tail"``; the next append first truncates those bytes away, so the
file stays parseable. A bad line anywhere *before* the last one cannot come from a crash: the
session is ``"corrupt"``, ``open(id)`` raises :class:`~toh_nb.core.errors.StoreError`, and the
other sessions of the store are unaffected.

Writing happens on one writer thread per store (:mod:`toh_nb.store.writer`): appends, log
creation, serialization and fsyncs never run on the event-loop thread, so a slow or stalled disk
delays only the log, never the agents. Appending from a running event loop queues the event and
returns at once (the writer takes it with the next acknowledgement, or within 20 ms); appending
from a thread with no running loop (scripts, tests, the crash helper) waits for the writer, so
direct use of the store keeps synchronous semantics. Reads (``open`` of a log not in memory, the
scan at construction) still run on the calling thread; with the listing index a reopened store
reads no transcript until one is asked for, and without one the scan reads each child's descriptor
from the head of its log (see :meth:`JsonlStore.listing_diagnostic`).

What "acknowledged" means: an event is acknowledged when :meth:`JsonlStore.acknowledged` (an
awaitable: the engine's :meth:`~toh_nb.core.runtime.Runtime.recorded`) or a synchronous
append/``create`` returns. Every call that hands out an id or a result awaits it for what it
acknowledges: a turn's end (``await kid.wait()``, a ``RunResult``, a settlement notice: every event of
that turn, and the header and descriptor before it); ``hub.start``/the delegation tool's continuable
start (the child's header and descriptor); a background job's start (its in-process child's header and
descriptor); ``send`` to a continuable child, resident or cold-resumed (the message's
``message/queued`` record, and for a cold resume the records closing the turn a crash left open: see
:mod:`toh_nb.core.inbox_log`), so that a message whose id was returned is delivered after a crash by
the next ``send`` that resumes the child; a ``kill`` (the ``message/discarded`` record of the
follow-ups it drops, so none of them runs after a crash). A write that fails (disk full, I/O error)
fails the acknowledgement with a :class:`~toh_nb.core.errors.StoreError` naming the file and the OS
error. An acknowledging call (``start``, ``send``, ``kill``) names the records it acknowledges
(``acknowledged(session, records)``): when that fails they are never written, the call raises and
leaves no trace (a start's whole log and its id go). A running turn's events that cannot be written
end that turn ``error`` with that text as its diagnostic; they stay queued, in order, and are written
only when that session is written or acknowledged again (or the store is flushed or closed), never
behind a caller's back.

Durability (``fsync=``):

- ``"always"``: an acknowledgement waits until the events are ``fdatasync``-ed (group commit:
  every event the writer took in one batch shares one sync per log), so an acknowledged event
  survives a machine crash. The slowest policy.
- ``"batch"`` (default): an acknowledgement waits until the events are handed to the OS with
  ``write()``, so a *process* crash (exception, ``kill -9``, kernel OOM kill) never loses an
  acknowledged event. A sync thread of the store ``fdatasync``-s the logs written since its last
  pass every ``batch_interval`` seconds (also when appends stop), never delaying a write (on Linux
  a pass with many logs, such as a burst of new children, syncs their file system once with
  ``syncfs`` instead, which also writes back other dirty data of that file system); so do
  :meth:`JsonlStore.flush` / :meth:`JsonlStore.close`. Only a *machine* crash (power loss, kernel
  panic) can lose events: those of the last ``batch_interval`` seconds, or of the last sync pass
  when the disk syncs slower than that.
- ``"never"``: ``write()`` before acknowledgement (same process-crash safety as ``"batch"``); the
  store never fsyncs on its own, only when :meth:`JsonlStore.flush` asks for it.

A log is created atomically: header and seed (which for a child includes its descriptor) are
written to ``.<id>.jsonl.tmp`` and linked to ``<id>.jsonl`` only when complete, so a crash during
``create`` leaves no half-written log. Reading treats a log that is a clean prefix of a valid one
(header only, header + descriptor, a torn last line) as never ``"corrupt"``.

Only regular files are read: every log is opened with ``O_NONBLOCK`` and checked with ``fstat``
before a byte is read, so a FIFO, device, socket or directory named ``<id>.jsonl`` never blocks the
store; it is reported by :meth:`JsonlStore.diagnostic` as ``"unreadable"`` with a problem naming
what it is, and its id stays reserved (as does any ``<valid id>.jsonl`` name, corrupt or not).

File handles: appends go through an LRU of at most ``max_open`` (default 64) open ``O_APPEND``
descriptors, so 10,000 sessions never hold 10,000 descriptors; an evicted session's next append
reopens its file (measured faster than open-append-close per event, and never slower). The writer's
spare files (anonymous inodes made ahead for new logs, at most half of ``max_open``) count against
the same bound.

Ids are checked with :func:`toh_nb.core.ids.is_valid_id` before any file-system access: a session
file name is always ``<valid id>.jsonl`` inside the store directory (opened relative to a directory
descriptor, never following a symlink for writing), so no id can read or write outside it.

One writer per directory: a writing store holds ``flock(LOCK_EX | LOCK_NB)`` on the store
directory's own descriptor (the one every log is opened through) for its lifetime, so deleting
``.lock`` (a ``git clean``, ``rm -rf runs/.*``) lets no second writer in; ``.lock`` still holds the
writer's pid for the refusal's message (and is locked too, for older versions). The lock is released
by :meth:`JsonlStore.close`, or by the kernel when the process dies; a second writing store on the
same directory, in this or another process, raises ``StoreError``. ``JsonlStore(dir,
read_only=True)`` takes no lock, sees the logs as they were when it scanned them (``open`` reads a
log's current content) and refuses every write with ``StoreError``. A reader treats a ``seq`` that
does not increase from one line to the next (what two writers leave) as corruption naming the line.

Every record read (header, event line, descriptor, the listing index's copies of them) is checked for
its shape by :mod:`toh_nb.core.records`: a complete line of the wrong shape cannot come from a crash,
so it makes its log ``"corrupt"`` wherever it is (the problem names the line and the field, e.g.
``line 4: message: expected an object, got an integer (5)``); only a last line that is not JSON is a
torn tail. A log whose header cannot be read is still listed, under the parent its line names (or,
naming none, under a root's listing), as ``[diagnostic: corrupt: <what>]``.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
import json
import os
import re
import stat
import threading
import weakref
from asyncio.events import _get_running_loop
from collections import OrderedDict
from typing import Any, Awaitable, Iterable

from ..core.checks import check_count, check_seconds
from ..core.errors import StoreError, UsageError
from ..core.event_lines import read_event_line
from ..core.ids import is_valid_id
from ..core.records import RecordError, check_descriptor
from ..core.session import DESCRIPTOR, Event, LogSummary, Session, SessionHeader, summarize
from . import index as listing_index
from .base import StoreBase
from .writer import TMP_PREFIX as _TMP_PREFIX
from .writer import TMP_SUFFIX as _TMP_SUFFIX
from .writer import LogWriter, LoopAck

try:  # POSIX; without fcntl (Windows) the single-writer lock is not enforced
    import fcntl
except ImportError:  # pragma: no cover - not a supported platform for the JSONL store
    fcntl = None  # type: ignore[assignment]

__all__ = ["JsonlStore", "FSYNC_POLICIES", "TORN_TAIL", "CORRUPT", "UNREADABLE"]

FSYNC_POLICIES = ("batch", "always", "never")

#: ``diagnostic(id)`` values
TORN_TAIL = "torn-tail"  # the last line was torn or corrupt and is ignored; the session loads
CORRUPT = "corrupt"  # a bad header or a bad line before the last one; ``open`` raises StoreError
UNREADABLE = "unreadable"  # the file could not be read (vanished, permissions); ``open`` raises

SUFFIX = ".jsonl"
LOCK_NAME = ".lock"
_HEADER_LIMIT = 1 << 20  # a header line longer than this is not a header
#: how far into a child's log the scan looks for its descriptor (after the header and its seed)
PEEK_LIMIT = 1 << 16
#: bytes of logs the index does not vouch for that listings of one store check in full (see
#: :meth:`JsonlStore.listing_diagnostic`); beyond it a child is listed from its log's head
LISTING_CHECK_BYTES = 8 << 20
#: how many sessions loaded from disk a store keeps strongly (see ``JsonlStore._recent``): the usual listing
#: sequence ``diagnostic(id)`` then ``open(id)`` parses a log once
RECENT_SESSIONS = 32

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: never blocks on open (a FIFO without a writer would), follows a symlinked log for reading
_READ_FLAGS = os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC

_DIGITS = re.compile(r"(\d+)")


def _no_running_loop() -> bool:
    """True on a thread with no running event loop: there an append may wait for the writer."""
    return _get_running_loop() is None


def _ignore(error: "StoreError | None") -> None:
    return None


def _is_safe_id(value: object) -> bool:
    """:func:`~toh_nb.core.ids.is_valid_id`, also refusing a trailing newline (its ``$`` accepts "x\\n")."""
    return is_valid_id(value) and not value.endswith("\n")  # type: ignore[union-attr]


def _order_key(header: SessionHeader) -> tuple:
    """Creation order: ``created``, then the id with digit runs compared as numbers (agent-9 < agent-10)."""
    parts = _DIGITS.split(header.id)
    parts[1::2] = [int(p) for p in parts[1::2]]
    return (header.created, parts)


def _parse_header(line: bytes, session_id: str) -> tuple[SessionHeader | None, str | None]:
    """(header, None) or (None, reason)."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        return None, f"header is not JSON ({error})"
    try:
        return SessionHeader.from_json(data, session_id), None
    except RecordError as error:
        reason = str(error)
        return None, reason if reason.startswith(("first line", "header names")) else f"invalid header ({reason})"


def _claimed_parent(line: bytes) -> "str | None | object":
    """The parent a log whose header is unreadable says it has, so the listing of that parent can show it as
    ``[diagnostic: corrupt: …]``: its ``parent_session`` when that is a session id, ``None`` when the line
    claims no parent and is not a root's, :data:`_ROOT_LOG` for a root's (never a child of anyone)."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if type(data) is not dict:
        return None
    parent = data.get("parent_session")
    if is_valid_id(parent):
        return parent
    return _ROOT_LOG if data.get("origin") == "root" else None


#: what :func:`_claimed_parent` answers for a root's log: it belongs to no listing
_ROOT_LOG = object()


def _parse_event(line: bytes) -> Event:
    """One event line; ``ValueError``/``UnicodeDecodeError`` when it is not JSON, :class:`RecordError`
    (a ``ValueError`` too) when it is JSON of the wrong shape (see :mod:`toh_nb.core.records`)."""
    return Event.from_checked(read_event_line(line))


def _summary_to_json(summary: LogSummary) -> list:
    data = [summary.turns, summary.input_tokens, summary.output_tokens, summary.last_reason, summary.last_time]
    if summary.last_error is not None:  # the seventh only when there is one (the sixth may then be [])
        return data + [list(summary.denied), summary.last_error]
    return data + [list(summary.denied)] if summary.denied else data  # the sixth only when there is one


def _summary_from_json(header: SessionHeader, descriptor: Any, data: Any) -> LogSummary | None:
    """A summary kept in the index, or ``None`` when it is not one (a foreign or damaged index)."""
    if not isinstance(data, list) or len(data) not in (5, 6, 7):
        return None
    turns, inp, out, reason, last = data[:5]
    denied = data[5] if len(data) >= 6 else []
    error = data[6] if len(data) == 7 else None
    if not isinstance(denied, list) or not all(isinstance(label, str) for label in denied):
        return None
    if not all(type(n) is int for n in (turns, inp, out)) or not (reason is None or isinstance(reason, str)):
        return None
    if not (last is None or type(last) in (int, float)) or not (error is None or isinstance(error, str)):
        return None
    return LogSummary(header, descriptor if isinstance(descriptor, dict) else None, turns, inp, out, reason, last,
                      tuple(denied), error)


#: what :func:`_seed_descriptor` answers when the line is not complete in the bytes it was given
_INCOMPLETE = object()


def _seed_descriptor(rest: bytes, seed_length: int) -> "dict | None | object | RecordError":
    """The descriptor a child's log holds right after its header and seed (``rest``: the bytes after
    the header line); ``None`` when that line is not a descriptor; ``_INCOMPLETE`` when ``rest``
    ends before that line does; a :class:`RecordError` naming the line when a line up to it has the
    wrong shape (certain corruption: no crash writes a complete line of the wrong shape)."""
    start = 0
    for number in range(seed_length + 1):
        end = rest.find(b"\n", start)
        if end < 0:
            return _INCOMPLETE
        try:
            event = _parse_event(rest[start:end])
        except RecordError as error:
            return RecordError(f"line {number + 2}: {error}")
        except (ValueError, UnicodeDecodeError):
            return None  # not JSON: a full read says what is wrong, and where
        start = end + 1
    if event.kind != DESCRIPTOR:
        return None
    return event.data


class _Parsed:
    """The outcome of reading one log file in full."""

    __slots__ = ("header", "events", "diagnostic", "problem", "repair")

    def __init__(self) -> None:
        self.header: SessionHeader | None = None
        self.events: list[Event] = []
        self.diagnostic: str | None = None
        self.problem: str | None = None  # human-readable detail for diagnostics and errors
        #: what the next append must do first: ("truncate", size) drops a torn tail,
        #: ("newline",) terminates a complete but unterminated last line
        self.repair: tuple | None = None


def parse_log(data: bytes, session_id: str) -> _Parsed:
    """Read one log file's bytes in full: its header, events, diagnostic and the repair its next append
    needs. Every full read of a log goes through here (the module-level name is the seam tests count
    reads with)."""
    out = _Parsed()
    # (start, end) of each line without its "\n"; the final entry may be unterminated
    spans: list[tuple[int, int]] = []
    start = 0
    find = data.find
    while start < len(data):
        end = find(b"\n", start)
        if end < 0:
            spans.append((start, len(data)))
            break
        spans.append((start, end))
        start = end + 1
    terminated = data.endswith(b"\n")
    if not spans:
        out.diagnostic, out.problem = CORRUPT, "empty log (no header)"
        return out
    h_start, h_end = spans[0]
    header, reason = _parse_header(data[h_start:h_end], session_id)
    if header is None:
        out.diagnostic, out.problem = CORRUPT, f"line 1: {reason}"
        return out
    out.header = header
    last = len(spans) - 1
    events = out.events
    for index in range(1, len(spans)):
        s, e = spans[index]
        line = data[s:e]
        if not line.strip():
            if index == last and not terminated:  # whitespace torn tail
                out.diagnostic, out.problem = TORN_TAIL, f"line {index + 1}: torn (blank, unterminated)"
                out.repair = ("truncate", s)
            continue  # a blank line carries nothing; tolerated anywhere
        try:
            event = _parse_event(line)
        except RecordError as error:  # complete JSON of the wrong shape: never what a crash leaves
            return _corrupt(out, f"line {index + 1}: {error}")
        except (ValueError, UnicodeDecodeError) as error:
            if index == last:
                out.diagnostic = TORN_TAIL
                out.problem = f"line {index + 1}: torn or corrupt last line ignored ({type(error).__name__}: {error})"
                out.repair = ("truncate", s)
                break
            return _corrupt(out, f"line {index + 1}: {type(error).__name__}: {error}")
        if events and event.seq <= events[-1].seq:  # two writers, or lines out of order: never a crash
            return _corrupt(out, f"line {index + 1}: seq {event.seq} does not follow seq {events[-1].seq} "
                                 "(seq must increase line by line)")
        events.append(event)
    if out.repair is None and not terminated:
        # The last line is complete JSON whose newline never made it: keep it, terminate it first.
        out.repair = ("newline",)
    return out


def _corrupt(out: _Parsed, problem: str) -> _Parsed:
    out.diagnostic, out.problem, out.events, out.repair = CORRUPT, problem, [], None
    return out


_CANNOT_READ = "cannot read the log"
_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _kind_of(mode: int) -> str:
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _open_regular(name: str, dir_fd: int | None) -> int:
    """Open a log for reading without ever blocking, or raise ``OSError`` naming what it is instead."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as error:  # e.g. ENXIO for a socket: say what it is when that is the reason
        try:
            mode = os.stat(name, dir_fd=dir_fd).st_mode
        except OSError:
            raise error from None
        if stat.S_ISREG(mode):
            raise
        raise OSError(errno.EINVAL, f"not a regular file ({_kind_of(mode)})") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"not a regular file ({_kind_of(mode)})")
    return fd


class JsonlStore(StoreBase):
    """A directory of JSONL session logs; satisfies :class:`~toh_nb.store.base.SessionStore`.

    ``JsonlStore(directory, fsync="batch" | "always" | "never", batch_interval=0.05,
    read_only=False, max_open=64)``. The directory is created if missing (not in read-only mode).
    Construction reads only the head of every ``*.jsonl`` file the listing index does not vouch
    for: its header (to build the children index) and, for a child, the descriptor that follows
    its seed; events are loaded when a session is opened.

    Listing contract:

    - :meth:`headers` / :meth:`children_of` contain every log whose header parsed, in creation
      order (``created``, then id), whatever the state of its events; ask :meth:`diagnostic` for
      each (``None``, ``"torn-tail"``, ``"corrupt"`` or ``"unreadable"``; checking a log read from
      disk parses it once, the result is cached). A listing asks :meth:`listing_diagnostic`, which
      parses at most ``LISTING_CHECK_BYTES`` of such logs per store and leaves the rest to their
      first load.
    - Logs whose header is missing or unparseable have no known parent, so they appear in no
      ``children_of``: :meth:`corrupt_ids` returns them (their ``diagnostic`` is ``"corrupt"``);
      :meth:`exists` is true for them and ``create`` refuses their ids.

    ``open(id)``: the live :class:`~toh_nb.core.session.Session` if this process still holds one
    (the same object), otherwise the log loaded from disk; ``KeyError`` for an unknown id *and* for
    an invalid id (checked before touching the file system); ``StoreError`` for a corrupt or
    unreadable log. A torn tail keeps its ``"torn-tail"`` diagnostic for the lifetime of this store
    object, even after the next append has repaired the file.

    ``create`` / appends raise ``StoreError`` for an invalid id, an existing id, a read-only or a
    closed store, or an OS error (the event then stays in memory only). Thread-safe.
    """

    #: ``open`` reads a file (a slow or network disk may take long): callers on the event loop use
    #: ``await run_engine(store.open, id)`` (``toh_nb.core.threads``; it takes the store's mutex, so that is safe)
    reads_block = True

    def __init__(self, directory: "str | os.PathLike[str]", fsync: str = "batch",
                 batch_interval: float = 0.05, *, read_only: bool = False, max_open: int = 64) -> None:
        if fsync not in FSYNC_POLICIES:
            raise UsageError(f'fsync must be "batch", "always" or "never", got {fsync!r}')
        check_seconds(batch_interval, "batch_interval", none=None)
        check_count(max_open, "max_open")
        if isinstance(directory, bytes):
            directory = os.fsdecode(directory)
        if os.fspath(directory) in ("", b""):  # an unset variable would make the current directory a store
            raise UsageError('JsonlStore directory is an empty path; pass a directory, or "." for the current one')
        self.directory = os.path.abspath(os.fspath(directory))
        self.fsync = fsync
        self.batch_interval = float(batch_interval)
        self.read_only = bool(read_only)
        self.max_open = max_open

        self._mutex = threading.Lock()
        self._closed = False
        self._pid = os.getpid()  # a forked child must not unlock its parent's flock
        self._lock_fd: int | None = None
        self._dir_locked = False  # flock held on _dir_fd (see _take_lock)
        self._dir_fd: int | None = None
        #: the thread that writes this directory (``None`` for a read-only store)
        self.writer: LogWriter | None = None
        #: after close: ids of sessions whose last events could not be written (never acknowledged)
        self.unwritten: list[str] = []
        self._descriptors: dict[str, dict] = {}  # id -> last descriptor (listing reads no transcript)
        self._had_index = False
        self._headers: dict[str, SessionHeader] = {}
        self._keys: dict[str, tuple] = {}  # id -> creation-order key
        self._children: dict[str | None, list[str]] = {}
        self._bad_headers: dict[str, str] = {}  # id -> problem (header unreadable)
        #: id -> the parent an unreadable header still names (None: none; _ROOT_LOG: a root's log)
        self._bad_parents: dict[str, "str | None | object"] = {}
        self._bad_by_parent: dict[str | None, list[str]] = {}  # the same, by parent (None: unknown)
        self._diag: dict[str, tuple[str, str]] = {}  # id -> (diagnostic, problem)
        self._verified: set[str] = set()  # fully read (or written) by this store
        #: id -> file identity (index.identity) of child logs whose descriptor was read from their
        #: head only (by the scan, or vouched for by the index as such): not verified
        self._peeked: dict[str, list[int]] = {}
        self._listing_budget = LISTING_CHECK_BYTES  # see listing_diagnostic
        #: id -> (file identity before the read, summary) of logs read in full (see summary)
        self._summaries: dict[str, tuple[list[int], LogSummary]] = {}
        self._live: "weakref.WeakValueDictionary[str, Session]" = weakref.WeakValueDictionary()
        #: sessions loaded from disk lately, held strongly so that the usual listing sequence
        #: ``diagnostic(id)`` then ``open(id)`` parses a log once (bounded; the runtime holds the rest)
        self._recent: OrderedDict[str, Session] = OrderedDict()

        if self.read_only:
            if not os.path.isdir(self.directory):
                if os.path.lexists(self.directory):
                    raise StoreError(f"store path {self.directory} is not a directory")
                raise StoreError(f"store directory {self.directory} does not exist (read-only store)")
        else:
            try:
                os.makedirs(self.directory, exist_ok=True)
            except (FileExistsError, NotADirectoryError):  # a file where the directory (or a parent) should be
                raise StoreError(f"store path {self.directory} is not a directory"
                                 + ("" if os.path.lexists(self.directory) else " (a parent of it is a file)")) from None
            except OSError as error:
                raise StoreError(f"cannot create store directory {self.directory}: {error}") from error
        try:
            self._dir_fd = os.open(self.directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except NotADirectoryError:  # replaced by a file since
            raise StoreError(f"store path {self.directory} is not a directory") from None
        except OSError as error:
            raise StoreError(f"cannot open store directory {self.directory}: {error}") from error
        try:
            if not self.read_only:
                self._take_lock()
            self._scan()
            if not self.read_only:
                self.writer = LogWriter(self.directory, self._dir_fd, fsync, self.batch_interval, max_open)
        except BaseException:
            self._closed = True
            self._release_descriptors()
            raise

    # -- lifecycle -------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        """Become the one writing store of the directory, or raise ``StoreError`` naming the holder.

        The exclusion is ``flock`` on the store directory's own descriptor (the one every file of the
        store is opened through), held for the store's life: nothing in the directory can be deleted
        to break it (``.lock`` removed by a ``git clean`` or ``rm -rf runs/.*`` used to let a second
        writer in). ``.lock`` still holds the writer's pid, for the refusal's message, and is locked
        too, as older versions of this store lock only it. Where a directory cannot be locked (a
        network file system that refuses ``flock`` on it) ``.lock`` alone excludes, as before.
        """
        if fcntl is None:  # pragma: no cover
            return
        directory_locked = True
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                directory_locked = False  # e.g. EBADF/ENOLCK/EOPNOTSUPP: this file system cannot
            else:
                self._refuse_second_writer(self._read_holder())
        try:
            fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | _O_NOFOLLOW | _O_CLOEXEC, 0o644, dir_fd=self._dir_fd)
        except OSError as error:
            self._unlock_directory(directory_locked)
            raise StoreError(f"cannot create lock file {os.path.join(self.directory, LOCK_NAME)}: {error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = self._read_holder(fd)
            os.close(fd)
            self._unlock_directory(directory_locked)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreError(f"cannot lock store directory {self.directory}: {error}") from error
            self._refuse_second_writer(holder)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is informational; the flock is what counts
        self._lock_fd = fd
        self._dir_locked = directory_locked

    def _unlock_directory(self, locked: bool) -> None:
        if locked and fcntl is not None:
            fcntl.flock(self._dir_fd, fcntl.LOCK_UN)

    def _read_holder(self, fd: int | None = None) -> str:
        """The pid the writing store left in ``.lock`` (``"unknown"`` when there is none to read)."""
        try:
            if fd is None:
                fd = os.open(LOCK_NAME, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK, dir_fd=self._dir_fd)
                try:
                    return os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
                finally:
                    os.close(fd)
            return os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        except OSError:
            return "unknown"

    def _refuse_second_writer(self, holder: str) -> None:
        remedy = "close the other hub"
        if holder == str(os.getpid()):
            holder += ", this process"
            # the usual way here: re-running a notebook cell `hub = tn.Hub(store=...)` while the
            # previous hub, still assigned to `hub`, holds the directory
            remedy = ("close the other hub first (hub.close(); in a notebook, re-running "
                      "`hub = tn.Hub(store=...)` needs the previous hub closed, which "
                      "`with tn.Hub(store=...) as hub:` does for you)")
        raise StoreError(
            f"store directory {self.directory} is in use by another hub (pid {holder}); open it "
            f"read-only with JsonlStore({self.directory!r}, read_only=True) or {remedy}"
        ) from None

    def _release_descriptors(self) -> None:
        # LOCK_UN acts on the open file description, which a forked child shares with us: only the
        # process that took the locks releases them (closing a copy never does)
        owner = fcntl is not None and os.getpid() == self._pid
        if self._lock_fd is not None:
            try:
                if owner:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
        if self._dir_fd is not None:
            try:
                if owner and self._dir_locked:
                    fcntl.flock(self._dir_fd, fcntl.LOCK_UN)
            finally:
                self._dir_locked = False
                os.close(self._dir_fd)
                self._dir_fd = None

    def close(self) -> None:
        """Write everything queued (one last retry of anything a failure left unwritten), sync it
        (unless ``fsync="never"``), stop the writer thread, close every descriptor, release the lock.

        Idempotent. Afterwards the index stays readable (``headers``, ``children_of``, live sessions
        from ``open``) but ``create`` and appends raise ``StoreError``. Events that could still not
        be written were never acknowledged (their turns ended ``error``); :attr:`unwritten` names
        their sessions.
        """
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        try:
            if self.writer is not None:
                self.writer.stop()
                self.unwritten = list(self.writer.leftover)
                if os.getpid() == self._pid:
                    self._save_index()
        finally:
            with self._mutex:
                self._release_descriptors()

    def __enter__(self) -> "JsonlStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # an abandoned store must not keep the directory locked
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._closed

    # -- scanning --------------------------------------------------------------------------------

    def _scan(self) -> None:
        headers = self._headers
        children = self._children
        known = listing_index.load(self._dir_fd)
        self._had_index = bool(known)
        with os.scandir(self._dir_fd) as scanned:
            entries = list(scanned)
        for entry in entries:
            name = entry.name
            if name.endswith(SUFFIX):
                session_id = name[: -len(SUFFIX)]
                if not _is_safe_id(session_id):
                    continue  # not a name this store writes; never touched
                header = self._from_index(entry, known.get(session_id)) if known else None
                if header is not None:
                    reason = ""
                else:
                    header, reason = self._read_head(name, session_id)
                if header is None:  # its id stays reserved whatever the file is
                    self._bad_headers[session_id] = reason
                    unreadable = reason.startswith(_CANNOT_READ)
                    self._diag[session_id] = (UNREADABLE, reason) if unreadable else (CORRUPT, f"line 1: {reason}")
                    if not unreadable:  # a log, of no known parent unless its line said one
                        self._bad_parents.setdefault(session_id, None)
                    continue
                headers[session_id] = header
                self._keys[session_id] = _order_key(header)
                children.setdefault(header.parent_session, []).append(session_id)
            elif (not self.read_only and name.startswith(_TMP_PREFIX) and name.endswith(_TMP_SUFFIX)
                  and _is_safe_id(name[len(_TMP_PREFIX): -len(_TMP_SUFFIX)])):
                try:  # a create that never completed
                    os.unlink(name, dir_fd=self._dir_fd)
                except OSError:
                    pass
        for ids in children.values():
            ids.sort(key=self._keys.__getitem__)
        for session_id in self._bad_parents:  # logs read whose header is wrong: see corrupt_children_of
            claim = self._bad_parents[session_id]
            if claim is not _ROOT_LOG:
                self._bad_by_parent.setdefault(claim, []).append(session_id)

    def _from_index(self, entry: os.DirEntry, record: list | None) -> SessionHeader | None:
        """The header of a log the index vouches for (unchanged since a store verified it, or since a
        scan peeked at its descriptor: then it is peeked again, not verified), else None."""
        if not isinstance(record, list) or not (len(record) == 3 or (len(record) == 4 and record[3] is False)
                                                or (len(record) == 5 and record[3] is True)):
            return None
        try:
            found = entry.stat(follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(found.st_mode) or listing_index.identity(found) != record[0]:
            return None
        session_id = entry.name[: -len(SUFFIX)]
        try:  # the index is data from outside too: the same checks as a log's own lines
            header = SessionHeader.from_json(record[1], session_id)
            if record[2] is not None:
                check_descriptor(record[2])
        except ValueError:
            return None
        if len(record) == 4:  # peeked: its descriptor is known, its transcript never checked
            if not isinstance(record[2], dict):
                return None
            self._peeked[session_id] = record[0]
        else:
            self._verified.add(session_id)
        if isinstance(record[2], dict):
            self._descriptors[session_id] = record[2]
        if len(record) == 5:  # verified, with the summary a table of agents needs (see summary)
            summary = _summary_from_json(header, record[2], record[4])
            if summary is not None:
                self._summaries[session_id] = (record[0], summary)
        return header

    def _save_index(self) -> None:
        """Record every log this store verified and left clean, and every child log it only peeked at
        and left unchanged, marked as such (see :mod:`toh_nb.store.index`)."""
        logs: dict[str, list] = {}
        unwritten = set(self.unwritten)
        for session_id, header in self._headers.items():
            verified = session_id in self._verified
            peeked = None if verified else self._peeked.get(session_id)
            if (not verified and peeked is None) or session_id in self._diag or session_id in unwritten:
                continue
            try:
                found = os.stat(session_id + SUFFIX, dir_fd=self._dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(found.st_mode):
                continue
            identity = listing_index.identity(found)
            if verified:
                logs[session_id] = [identity, header.to_json(), self._descriptors.get(session_id)]
                try:
                    summary = self._known_summary(session_id, identity)
                except Exception:  # pragma: no cover - the index is a cache: never fail a close for it
                    summary = None
                if summary is not None:
                    logs[session_id] += [True, _summary_to_json(summary)]
            elif identity == peeked:  # the head it was listed from is still this file's
                logs[session_id] = [identity, header.to_json(), self._descriptors[session_id], False]
        if logs or self._had_index:
            listing_index.save(self._dir_fd, logs)

    def _known_summary(self, session_id: str, identity: list[int] | None) -> LogSummary | None:
        """A log's summary without reading it: from the session this store holds in memory (current
        even before the writer has written it), else the one kept for this very file (``identity``:
        the file's as it is now), else ``None``. Used by :meth:`summary` and at close (the index)."""
        with self._mutex:
            live = self._live.get(session_id)
            kept = self._summaries.get(session_id)
        if live is not None:
            return summarize(live)
        return kept[1] if kept is not None and kept[0] == identity else None

    def how_read(self, session_id: str) -> str | None:
        """How far this store has checked a log: ``"full"`` (read or written in full by it, or vouched
        for as such by the index), ``"head"`` (its descriptor came from its first :data:`PEEK_LIMIT`
        bytes; the rest is unchecked, see :meth:`listing_diagnostic`), else ``None``."""
        if session_id in self._verified:
            return "full"
        return "head" if session_id in self._peeked else None

    def descriptor(self, session_id: str) -> dict | None:
        """A child's descriptor without loading its transcript when the store already knows it
        (written by this store, read before, or vouched for by the index); else the log is read."""
        if not _is_safe_id(session_id):
            return None
        known = self._descriptors.get(session_id)
        if known is not None or (session_id in self._verified and session_id in self._headers):
            return known
        return self.open(session_id).descriptor

    def _read_head(self, name: str, session_id: str) -> tuple[SessionHeader | None, str]:
        """The header of a log the index does not vouch for; for a child, also its descriptor when it
        lies in the log's first ``PEEK_LIMIT`` bytes (remembered as *peeked*: the rest of the log is
        not read, see :meth:`listing_diagnostic`)."""
        try:
            fd = _open_regular(name, self._dir_fd)
        except OSError as error:
            return None, f"{_CANNOT_READ} ({error.strerror})"
        try:
            data = b""
            newline = -1
            while newline < 0:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                newline = chunk.find(b"\n")
                if newline >= 0:
                    newline += len(data)
                data += chunk
                if newline < 0 and len(data) > _HEADER_LIMIT:
                    return None, "header line too long"
            line = data if newline < 0 else data[:newline]
            if not line:
                return None, "empty log (no header)"
            header, reason = _parse_header(line, session_id)
            if header is None:
                self._bad_parents[session_id] = _claimed_parent(line)
                return None, reason or ""
            if header.origin != "subagent" or newline < 0:
                return header, ""
            rest = data[newline + 1:]
            descriptor = _seed_descriptor(rest, header.seed_length)
            while descriptor is _INCOMPLETE and len(data) < PEEK_LIMIT:  # a long seed (or a long line)
                chunk = os.read(fd, PEEK_LIMIT - len(data))
                if not chunk:
                    break
                data += chunk
                rest += chunk
                descriptor = _seed_descriptor(rest, header.seed_length)
            if isinstance(descriptor, dict):
                self._descriptors[session_id] = descriptor
                self._peeked[session_id] = listing_index.identity(os.fstat(fd))
            elif isinstance(descriptor, RecordError):  # listed by its header, as corrupt (what and where)
                self._diag[session_id] = (CORRUPT, str(descriptor))
            return header, ""
        except OSError as error:
            return None, f"{_CANNOT_READ} ({error.strerror})"
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------------

    def _read_locked(self, session_id: str) -> _Parsed:
        """Read and parse a log in full; records its diagnostic and pending repair."""
        if self._closed:  # the directory descriptor is gone: never fall back to a relative path
            raise StoreError(f'store {self.directory} is closed: cannot read session log "{session_id}"')
        try:
            fd = _open_regular(session_id + SUFFIX, self._dir_fd)
            try:
                chunks = []
                while True:
                    chunk = os.read(fd, 1 << 20)
                    if not chunk:
                        break
                    chunks.append(chunk)
            finally:
                os.close(fd)
        except OSError as error:
            parsed = _Parsed()
            parsed.diagnostic, parsed.problem = UNREADABLE, f"{_CANNOT_READ} ({error.strerror})"
        else:
            parsed = parse_log(b"".join(chunks), session_id)
        self._verified.add(session_id)
        if parsed.diagnostic is not None:
            self._diag[session_id] = (parsed.diagnostic, parsed.problem or "")
        elif self._diag.get(session_id, (None,))[0] != TORN_TAIL:  # a repaired tail stays reported
            self._diag.pop(session_id, None)
        if parsed.repair is not None and self.writer is not None:
            self.writer.repair(session_id, parsed.repair)
        return parsed

    def open(self, session_id: str) -> Session:
        """The session's log: the live object if this process holds one, else loaded from disk.

        ``KeyError`` for an unknown or invalid id (no file-system access for an invalid one);
        ``StoreError`` for a corrupt or unreadable log, or when a closed store would have to read.
        """
        if not _is_safe_id(session_id):
            raise KeyError(session_id)
        with self._mutex:
            session = self._live.get(session_id)
            if session is not None:
                return session
            if session_id in self._bad_headers:
                diagnostic, problem = self._diag[session_id]
                raise StoreError(f'session log "{session_id}" is {diagnostic}: {problem}')
            header = self._headers.get(session_id)
            if header is None:
                raise KeyError(session_id)
            parsed = self._read_locked(session_id)
            if parsed.diagnostic in (CORRUPT, UNREADABLE):
                raise StoreError(f'session log "{session_id}" is {parsed.diagnostic}: {parsed.problem}')
            return self._adopt(header, parsed)

    def _adopt(self, header: SessionHeader, parsed: _Parsed) -> Session:
        session = Session(header, parsed.events, sink=self._refuse if self.read_only else self._append)
        if session.descriptor is not None:
            self._descriptors[header.id] = session.descriptor
        self._live[header.id] = session
        recent = self._recent
        recent[header.id] = session
        if len(recent) > RECENT_SESSIONS:
            recent.popitem(last=False)
        return session

    def summary(self, session_id: str) -> LogSummary:
        """A log's :class:`~toh_nb.core.session.LogSummary` (turns, tokens, last reason …), raising
        like :meth:`open`. A session this process holds is summarised from memory; any other log is
        read once and its summary kept until the file changes (one ``stat`` per call tells).

        Why: a table of agents (``hub.agents()``, the live tree that refreshes it up to ten times a
        second) needs these few figures of every stored child; reading each log again for them cost
        0.8 s per refresh for 1,000 stored children of 40 KB.
        """
        if not _is_safe_id(session_id):
            raise KeyError(session_id)
        identity = None
        if not self._closed:  # a closed store has no directory descriptor: open() says what it can
            try:
                identity = listing_index.identity(
                    os.stat(session_id + SUFFIX, dir_fd=self._dir_fd, follow_symlinks=False))
            except OSError:  # gone: open() says so
                pass
        known = self._known_summary(session_id, identity)
        if known is not None:
            return known
        summary = summarize(self.open(session_id))  # taken before the read: a later append only re-reads
        if identity is not None:
            with self._mutex:
                self._summaries[session_id] = (identity, summary)
        return summary

    def exists(self, session_id: str) -> bool:
        """True when a log with this id exists (including a corrupt one)."""
        return _is_safe_id(session_id) and (session_id in self._headers or session_id in self._bad_headers)

    def children_of(self, parent_id: str) -> list[SessionHeader]:
        """Headers of the logs whose ``parent_session`` is ``parent_id``, in creation order."""
        with self._mutex:
            return [self._headers[i] for i in self._children.get(parent_id, ())]

    def corrupt_children_of(self, parent_id: str) -> list[str]:
        """Ids of logs whose header is unreadable that the listing of ``parent_id`` shows as corrupt, sorted:
        those whose damaged header still names ``parent_id`` as its parent and, when ``parent_id`` is a
        root's log, those that name no parent at all (an empty file, a line that is not a header): a
        child that cannot be read is reported where its owner looks, never silently dropped."""
        if not self._bad_headers:
            return []
        with self._mutex:
            by_parent = self._bad_by_parent
            found = list(by_parent.get(parent_id, ()))
            parent_header = self._headers.get(parent_id)
            if parent_header is not None and parent_header.origin == "root":
                found.extend(by_parent.get(None, ()))
            return sorted(found)

    def headers(self) -> list[SessionHeader]:
        """Every parsed header, in creation order (logs with an unreadable header: :meth:`corrupt_ids`)."""
        with self._mutex:
            keys = self._keys
            return [self._headers[i] for i in sorted(self._headers, key=keys.__getitem__)]

    def reserved_ids(self) -> list[str]:
        """Every id with a ``<id>.jsonl`` entry, whatever it holds (corrupt, a FIFO, a directory …)."""
        with self._mutex:
            return [*self._headers, *self._bad_headers]

    def corrupt_ids(self) -> list[str]:
        """Ids of logs whose header is missing or unparseable (absent from headers/children_of), sorted."""
        with self._mutex:
            return sorted(self._bad_headers)

    def diagnostic(self, session_id: str) -> str | None:
        """``None`` (fine or unknown), ``"torn-tail"``, ``"corrupt"`` or ``"unreadable"``.

        A log not yet read in full by this store is parsed once to find out (then cached; a closed
        store raises ``StoreError`` instead).
        """
        return self._diagnostic(session_id, listing=False)

    def listing_diagnostic(self, session_id: str) -> str | None:
        """:meth:`diagnostic` as a listing asks it: what is known at once; a child log the scan only
        peeked at (the index does not vouch for it) is checked in full while the listings of this
        store have checked less than ``LISTING_CHECK_BYTES`` of such logs, and after that answers
        ``None`` without reading it: its corruption, if any, is found when its transcript is first
        loaded (``open``, :meth:`diagnostic`, a resume), and listed from then on.

        Why: listing a store that has no index (written by a process that crashed, or by another
        tool) would otherwise parse every transcript (10,000 children and 1 GB: ~12 s here); a small
        store is still checked in full, as before.
        """
        return self._diagnostic(session_id, listing=True)

    def _diagnostic(self, session_id: str, listing: bool) -> str | None:
        if not _is_safe_id(session_id):
            return None
        with self._mutex:
            known = self._diag.get(session_id)
            if known is not None:
                return known[0]
            header = self._headers.get(session_id)
            if header is None or session_id in self._verified:
                return None
            peeked = self._peeked.get(session_id) if listing else None
            if peeked is not None:  # listed from its head: checked while the listings' budget lasts
                if peeked[0] > self._listing_budget:
                    return None
                self._listing_budget -= peeked[0]
            parsed = self._read_locked(session_id)
            if parsed.diagnostic not in (CORRUPT, UNREADABLE):
                self._adopt(header, parsed)  # a following open() returns it without reading again
            return parsed.diagnostic

    def problem(self, session_id: str) -> str | None:
        """The human-readable detail behind :meth:`diagnostic` (e.g. ``"line 7: JSONDecodeError: …"``)."""
        if self.diagnostic(session_id) is None:
            return None
        with self._mutex:
            known = self._diag.get(session_id)
            return known[1] if known is not None else None

    def __len__(self) -> int:
        return len(self._headers) + len(self._bad_headers)

    def __contains__(self, session_id: object) -> bool:
        return isinstance(session_id, str) and self.exists(session_id)

    # -- writing ---------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"store {self.directory} is read-only")
        if self._closed:
            raise StoreError(f"store {self.directory} is closed")

    def create(self, header: SessionHeader, seed: Iterable[Event] = ()) -> Session:
        """Reserve the id and queue the new log (header + seed, written atomically); return its session.

        From a running event loop this returns at once (the log is acknowledged with the first turn
        that ends); elsewhere it waits for the writer and raises ``StoreError`` if the log could not
        be written (the id is then free again).
        """
        session_id = header.id
        if not _is_safe_id(session_id):
            raise StoreError(f"invalid session id {session_id!r}: use letters, digits, '-', '_', '.', ':'")
        seed = list(seed)
        with self._mutex:
            self._check_writable()
            if session_id in self._headers or session_id in self._bad_headers:
                raise StoreError(f'session "{session_id}" already exists')
            session = Session(header, seed, sink=self._append)
            self._index_locked(header)
            self._verified.add(session_id)
            self._live[session_id] = session
            if session.descriptor is not None:
                self._descriptors[session_id] = session.descriptor
            self.writer.create(session, seed)
        if _no_running_loop():
            try:
                self.writer.wait(session_id)
            except StoreError:
                self.writer.forget(session_id)
                with self._mutex:
                    self._unindex_locked(header)
                raise
        return session

    def _index_locked(self, header: SessionHeader) -> None:
        session_id = header.id
        self._headers[session_id] = header
        key = self._keys[session_id] = _order_key(header)
        siblings = self._children.setdefault(header.parent_session, [])
        if not siblings or self._keys[siblings[-1]] <= key:
            siblings.append(session_id)
        else:
            bisect.insort(siblings, session_id, key=self._keys.__getitem__)

    def _unindex_locked(self, header: SessionHeader) -> None:
        session_id = header.id
        self._headers.pop(session_id, None)
        self._keys.pop(session_id, None)
        self._descriptors.pop(session_id, None)
        self._verified.discard(session_id)
        self._live.pop(session_id, None)
        siblings = self._children.get(header.parent_session)
        if siblings and session_id in siblings:
            siblings.remove(session_id)

    def _append(self, session: Session, event: Event) -> None:
        """The sink of every writable session: queue the event for the writer thread."""
        if self._closed or self.read_only:
            self._check_writable()
        if event.kind == DESCRIPTOR:
            self._descriptors[session.header.id] = event.data
        self.writer.append(session, event)
        if _no_running_loop():  # a failure raises and the event is never written (Session.append forgets it)
            self.writer.wait(session.header.id, records=(event,))

    def _refuse(self, session: Session, event: Event) -> None:
        raise StoreError(f'store {self.directory} is read-only: cannot append to session "{session.header.id}"')

    # -- acknowledging and syncing ---------------------------------------------------------------

    def acknowledged(self, session: Session, records: Iterable[Event] | None = None) -> "Awaitable[None] | None":
        """An awaitable that resolves once every event queued so far for ``session`` is written (and
        fsynced under ``"always"``), or fails with ``StoreError`` when it could not be; ``None`` when
        there is nothing to wait for (a read-only or closed store). Call it on the event loop.

        ``records``: the events an acknowledging call wrote (a ``send``'s ``message/queued``, a start's
        log): when the acknowledgement fails they are never written, and a log whose creation failed
        is forgotten (its id is free again); the caller takes them out of memory (``Session.retract``)."""
        if self._closed or self.read_only:
            return None
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if records is None:
            self.writer.barrier(session.header.id, LoopAck(loop, future))
            return future
        self.writer.barrier(session.header.id, LoopAck(loop, future), records=tuple(records))
        return self._forgetting(session, future)

    async def _forgetting(self, session: Session, future: "asyncio.Future[None]") -> None:
        try:
            await future
        except StoreError:
            if self.writer.dropped(session.header.id):  # its creation was dropped with the records
                with self._mutex:
                    self._unindex_locked(session.header)
            raise

    def flush(self, session: Session | None = None, wait: bool = True) -> None:
        """fsync what was written and not yet synced (one session's log, or all), whatever the policy.

        ``wait=True`` blocks until done and raises ``StoreError`` for anything the writer could not
        write or sync; ``wait=False`` only asks the writer (what the engine does on the loop thread).
        """
        if self._closed or self.read_only:
            return
        session_id = session.header.id if session is not None else None
        if wait:
            self.writer.wait(session_id, sync=True)
        else:
            self.writer.barrier(session_id, _ignore, sync=True)

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else f"fsync={self.fsync}"
        state = ", closed" if self._closed else ""
        return f"JsonlStore({self.directory!r}, {mode}, {len(self)} sessions{state})"
