"""The JSONL store's listing index: what a store already knows about its logs, kept for the next open.

Why: listing children needs each log's header, descriptor and whether it is corrupt. Finding out
from the logs means reading every log in full (a 1 GB store: seconds). The index remembers, per log
this store verified (parsed in full, or wrote itself) and left clean: its header, its descriptor and
the file's identity when the store closed (size, modification time in ns, inode). On the next open a
log whose ``lstat`` still matches is taken from the index without reading it; any other log (changed,
replaced, new, or absent from the index) is read and checked as if there were no index. So the index
is only ever a cache: a missing, stale, torn or foreign index costs speed, never correctness.

A child log the store listed from its head only (header and descriptor, its transcript never parsed:
see :meth:`~toh_nb.store.jsonl.JsonlStore.listing_diagnostic`) is kept as ``[identity, header,
descriptor, false]``: the next open takes it as *peeked* again, not as verified, so its corruption is
still looked for. A verified log whose summary the store had (what a table of agents shows: turns,
tokens, last turn-end reason and event time; see :meth:`~toh_nb.store.jsonl.JsonlStore.summary`) is
kept as ``[identity, header, descriptor, true, [turns, input_tokens, output_tokens, reason, time]]``,
then the permissions refused to an external agent when there are some (a sixth element, a list of
labels) and the last turn's diagnostic when there is one (a seventh, text; the sixth is then present,
perhaps empty). A store of an older version ignores such entries (it reads those logs).

File: ``<dir>/.toh-index.json`` (a name no session id can take), written atomically at
:meth:`~toh_nb.store.jsonl.JsonlStore.close` (temporary file + ``rename``), never fsync-ed.
"""

from __future__ import annotations

import json
import os
import stat

__all__ = ["INDEX_NAME", "load", "save", "identity"]

INDEX_NAME = ".toh-index.json"
_TMP_NAME = ".toh-index.json.tmp"
VERSION = 1


def identity(result: os.stat_result) -> list[int]:
    """What must not have changed for an entry to be trusted."""
    return [result.st_size, result.st_mtime_ns, result.st_ino]


def load(dir_fd: int) -> dict[str, list]:
    """``{id: [identity, header_json, descriptor_or_None(, false | true, summary)]}``; ``{}`` when there is
    no usable index."""
    try:
        fd = os.open(INDEX_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
                     dir_fd=dir_fd)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("logs"), dict):
        return {}
    return data["logs"]


def save(dir_fd: int, logs: dict[str, list]) -> None:
    """Replace the index atomically; a failure leaves the previous one (or none), which is safe."""
    data = json.dumps({"version": VERSION, "logs": logs}, separators=(",", ":")).encode("ascii")
    try:
        fd = os.open(_TMP_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(_TMP_NAME, INDEX_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(_TMP_NAME, dir_fd=dir_fd)
        except OSError:
            pass
