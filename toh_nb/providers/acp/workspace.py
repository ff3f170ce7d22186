"""The child's workspace: the one directory an external agent's file requests may touch.

ACP lets the agent ask the *client* to read and write files (``fs/read_text_file``,
``fs/write_text_file``). We serve those only inside the workspace the user named, because the agent is a
program we do not control: a relative path, a ``..`` walk or a symlink leading out is refused.

Why a walk and not a check: checking a resolved path string and opening it afterwards can be raced (the
agent swaps a directory of the path for a symlink in between, atomically, and the open follows it out).
So a path is never resolved as a string: it is opened one component at a time, each relative to the
file descriptor of the directory before it (held since the workspace was made) and with ``O_NOFOLLOW``,
so no component is ever followed by the kernel. A symlink met on the way is read (``readlinkat``) and
its target walked the same way, from the directory that holds it (or from the workspace root for an
absolute target spelled inside the workspace): symlinks that stay inside are followed, any that leads
out is refused, whatever is swapped meanwhile. ``..`` climbs the descriptors actually walked, never
above the root. Only regular files are read (opened non-blocking, so a FIFO cannot stall the hub).

Reads are bounded: ``fs/read_text_file`` with ``line``/``limit`` reads the file only up to the last line
asked for, and no request reads more than ``max_read_bytes`` of a file (:data:`MAX_READ_BYTES` unless
``tn.AcpAgent(max_read_bytes=...)`` says otherwise): one that would is refused with a text naming the
cap, so a huge or sparse file cannot fill the memory. The link serves both requests on the engine's
threads, never on the event loop; each walk holds its own duplicate of the root's descriptor, so a
workspace closed meanwhile never has its number reused under a request in flight.
Writes create missing parent directories (as before) and replace the file atomically: a temporary file
in the same directory, renamed over the name within that directory's descriptor.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
import weakref

from ...core.errors import UsageError

#: symlinks followed for one request at most (the kernel's own limit)
MAX_SYMLINKS = 40
#: bytes of a file one ``fs/read_text_file`` reads at most by default (``tn.AcpAgent(max_read_bytes=)``)
MAX_READ_BYTES = 16 * 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceError(Exception):
    """A file request the workspace refuses (the message is what the agent reads)."""


def checked_directory(cwd: object, name: str = "cwd") -> str:
    """``cwd`` if it is an absolute path to a directory we can enter; a clear ``UsageError`` otherwise."""
    if not isinstance(cwd, (str, os.PathLike)):
        raise UsageError(f"{name} must be an absolute directory path, got {cwd!r}")
    path = os.fspath(cwd)
    if not os.path.isabs(path):
        raise UsageError(f"{name} must be an absolute path (the agent's workspace), got {path!r}")
    if not os.path.isdir(path):
        raise UsageError(f"{name} {path!r} is not an existing directory")
    if not os.access(path, os.X_OK | os.R_OK):
        raise UsageError(f"{name} {path!r} cannot be entered (permission denied)")
    return os.path.normpath(path)


class _Symlink(Exception):
    """The last component is a symlink: walk its target instead."""

    def __init__(self, target: str) -> None:
        self.target = target


class Workspace:
    """Serves text files under ``root`` (see the module docstring). Paths may be spelled under the root as
    given or under its real path. Holds a descriptor of the root until :meth:`close`."""

    def __init__(self, root: str) -> None:
        self.given = os.path.normpath(os.path.abspath(root))
        self.root = os.path.realpath(root)
        try:
            self._fd: int | None = os.open(self.root, _DIR_FLAGS)
        except OSError as error:
            raise UsageError(f"workspace {root!r} cannot be opened: {error.strerror or error}") from None
        self._finalizer = weakref.finalize(self, os.close, self._fd)
        self._lock = threading.Lock()  # requests run on worker threads; close on the loop's

    def close(self) -> None:
        """Release the root's descriptor (later requests are refused). Safe to call twice."""
        with self._lock:
            self._fd = None
            self._finalizer()

    def _root_fd(self) -> int:
        """A duplicate of the root's descriptor for one walk (the walk closes it)."""
        with self._lock:
            if self._fd is None:
                raise WorkspaceError(f"the workspace {self.root} is closed")
            return os.dup(self._fd)

    # -- paths -------------------------------------------------------------------------------------

    def _outside(self, path: str) -> WorkspaceError:
        return WorkspaceError(f"path is outside the workspace {self.root}: {path}")

    def _parts(self, path: str, asked: str) -> list[str]:
        """The components of ``path`` below the root (``asked``: the path as the agent gave it)."""
        for prefix in (self.given, self.root):
            if path == prefix:
                return []
            if path.startswith(prefix.rstrip("/") + "/"):
                return [part for part in path[len(prefix):].split("/") if part not in ("", ".")]
        raise self._outside(asked)

    def _walk(self, path: str, leaf, *, make_dirs: bool = False):
        """Walk ``path`` beneath the root and call ``leaf(dir_fd, name)`` for its last component;
        ``leaf`` raises :class:`_Symlink` to have the walk go on through a symlink's target."""
        if not isinstance(path, str) or not os.path.isabs(path):
            raise WorkspaceError(f"path must be absolute: {path!r}")
        if "\0" in path:
            raise WorkspaceError(f"path contains a NUL character: {path!r}")
        parts = self._parts(path, path)
        root = self._root_fd()
        stack: list[int] = []  # descriptors opened below the root
        hops = 0
        try:
            while True:
                here = stack[-1] if stack else root
                if not parts:
                    raise WorkspaceError(f"not a file: {path}")
                name = parts.pop(0)
                if name == "..":
                    if not stack:
                        raise self._outside(path)
                    os.close(stack.pop())
                    continue
                try:
                    if not parts:
                        return leaf(here, name)
                    stack.append(os.open(name, _DIR_FLAGS, dir_fd=here))
                    continue
                except _Symlink as link:
                    target = link.target
                except FileNotFoundError:
                    if not (make_dirs and parts) or hops >= MAX_SYMLINKS:
                        raise
                    hops += 1  # also bounds an agent that removes the directory again and again
                    try:
                        os.mkdir(name, 0o777, dir_fd=here)
                    except FileExistsError:
                        pass
                    parts.insert(0, name)
                    continue
                except OSError as error:
                    if error.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        raise
                    try:
                        target = os.readlink(name, dir_fd=here)
                    except OSError:
                        raise error from None  # not a symlink (any more): a file where a directory should be
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise WorkspaceError(f"too many levels of symbolic links: {path}")
                if target.startswith("/"):
                    parts = self._parts(target, path) + parts
                    while stack:
                        os.close(stack.pop())
                else:
                    parts = [p for p in target.split("/") if p not in ("", ".")] + parts
        finally:
            for fd in stack:
                os.close(fd)
            os.close(root)

    # -- requests ----------------------------------------------------------------------------------

    def read(self, path: str, line: int | None = None, limit: int | None = None,
             max_bytes: int = MAX_READ_BYTES) -> str:
        """The text of ``path`` (lines ``line`` on, ``limit`` of them), reading no more of the file than
        that and at most ``max_bytes``. Blocking: the link calls it off the loop."""
        try:
            return self._walk(path, lambda here, name: _read_leaf(here, name, line, limit, max_bytes))
        except _TooLarge:
            raise WorkspaceError(too_large(path, max_bytes)) from None
        except FileNotFoundError:
            raise WorkspaceError(f"no such file: {path}") from None
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"cannot read {path}: {_reason(error)}") from None

    def write(self, path: str, content: str) -> None:
        data = content.encode("utf-8")
        try:
            self._walk(path, lambda here, name: _write_leaf(here, name, data), make_dirs=True)
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"cannot write {path}: {_reason(error)}") from None


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error)


def too_large(path: str, max_bytes: int) -> str:
    """The refusal of a read that would go past the cap (what the agent reads)."""
    return (f"cannot read {path}: the lines asked for go past the read limit of {max_bytes} bytes "
            "(max_read_bytes= of tn.AcpAgent); ask for fewer lines (line=, limit=)")


class _TooLarge(Exception):
    """The read would go past ``max_bytes``."""


def _read_leaf(here: int, name: str, line: int | None, limit: int | None, max_bytes: int) -> str:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=here)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _Symlink(os.readlink(name, dir_fd=here)) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if line is None and limit is None:
            if os.fstat(fd).st_size > max_bytes:
                raise _TooLarge
            data = handle.read(max_bytes + 1)
            if len(data) > max_bytes:  # it grew since
                raise _TooLarge
            return data.decode("utf-8", "replace")
        return _lines(handle, max((line or 1) - 1, 0), None if limit is None else max(limit, 0), max_bytes)


def _lines(handle, start: int, count: int | None, max_bytes: int) -> str:
    """Lines ``start`` (0-based) to ``start + count`` of ``handle``, reading nothing past the last of them
    and at most ``max_bytes`` in all (the lines skipped count too)."""
    left = max_bytes
    out: list[bytes] = []
    index = 0
    while count is None or len(out) < count:
        chunk = handle.readline(left + 1)
        if not chunk:
            break
        left -= len(chunk)
        if left < 0:
            raise _TooLarge
        if index >= start:
            out.append(chunk)
        index += 1
    return b"".join(out).decode("utf-8", "replace")


def _write_leaf(here: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``here`` atomically; a symlink there is followed (its target walked), never
    written through. A swap after the look only changes which entry of this directory is replaced."""
    try:
        old = os.stat(name, dir_fd=here, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and stat.S_ISLNK(old.st_mode):
        raise _Symlink(os.readlink(name, dir_fd=here))
    if old is not None and stat.S_ISDIR(old.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    temp = f".{secrets.token_hex(6)}.toh_nb-write"
    fd = os.open(temp, _TEMP_FLAGS, 0o644, dir_fd=here)
    try:
        with os.fdopen(fd, "wb") as handle:
            if old is not None:  # an existing file keeps its permissions
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            handle.write(data)
        os.rename(temp, name, src_dir_fd=here, dst_dir_fd=here)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=here)
        except OSError:
            pass
        raise
