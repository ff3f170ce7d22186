"""The child's workspace: the one directory an external agent's file requests may touch.

ACP lets the agent ask the *client* to read and write files (``fs/read_text_file``,
``fs/write_text_file``). We serve those only inside the workspace the user named: a relative path, a
``..`` walk or a symlink leading out is refused, because the agent is a program we do not control.
"""

from __future__ import annotations

import os

from ..core.errors import UsageError


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


class Workspace:
    """Serves text files under ``root`` (symlinks resolved before the check)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)

    def resolve(self, path: str) -> str:
        if not isinstance(path, str) or not os.path.isabs(path):
            raise WorkspaceError(f"path must be absolute: {path!r}")
        real = os.path.realpath(path)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise WorkspaceError(f"path is outside the workspace {self.root}: {path}")
        return real

    def read(self, path: str, line: int | None = None, limit: int | None = None) -> str:
        real = self.resolve(path)
        try:
            with open(real, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except FileNotFoundError:
            raise WorkspaceError(f"no such file: {path}") from None
        except (IsADirectoryError, PermissionError, OSError) as error:
            raise WorkspaceError(f"cannot read {path}: {error.strerror or error}") from None
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    def write(self, path: str, content: str) -> None:
        real = self.resolve(path)
        try:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
        except OSError as error:
            raise WorkspaceError(f"cannot write {path}: {error.strerror or error}") from None
