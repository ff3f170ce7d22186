"""The workspace's file serving alone: symlinks, ``..``, odd files, atomic writes, and the race a
hostile agent can run against a check-then-open (a path component swapped for a symlink)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from toh_nb.providers.acp.workspace import MAX_READ_BYTES, Workspace, WorkspaceError, too_large


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    workspace = Workspace(str(root))
    yield root, workspace
    workspace.close()


def test_symlinks_and_dotdot_that_stay_inside_are_followed(ws, tmp_path):
    root, workspace = ws
    (root / "real").mkdir()
    (root / "real" / "a.txt").write_text("inside")
    (root / "alias").symlink_to("real")  # relative, stays inside
    (root / "abs").symlink_to(root / "real" / "a.txt")  # absolute, spelled inside
    (root / "up").symlink_to("real/../real/a.txt")
    assert workspace.read(str(root / "alias" / "a.txt")) == "inside"
    assert workspace.read(str(root / "abs")) == "inside"
    assert workspace.read(str(root / "up")) == "inside"
    assert workspace.read(str(root / "real" / ".." / "real" / "a.txt")) == "inside"
    workspace.write(str(root / "abs"), "rewritten")  # through the link: the target changes, the link stays
    assert (root / "abs").is_symlink() and (root / "real" / "a.txt").read_text() == "rewritten"
    (tmp_path / "out.txt").write_text("outside")
    (root / "real" / "sneaky").symlink_to("../../out.txt")
    for bad in (root / "real" / "sneaky", root / ".." / "out.txt", root / "real" / ".." / ".." / "out.txt"):
        with pytest.raises(WorkspaceError) as info:
            workspace.read(str(bad))
        assert str(info.value) == f"path is outside the workspace {root}: {bad}"
        with pytest.raises(WorkspaceError):
            workspace.write(str(bad), "pwned")
    assert (tmp_path / "out.txt").read_text() == "outside"


def test_odd_requests_are_refused_with_a_message_not_an_exception(ws):
    root, workspace = ws
    os.mkfifo(root / "pipe")  # a read would block the hub's loop forever
    (root / "dir").mkdir()
    (root / "loop").symlink_to("loop")
    (root / "file").write_text("x")
    cases = [
        (lambda: workspace.read(str(root / "pipe")), f"cannot read {root / 'pipe'}: not a regular file"),
        (lambda: workspace.read(str(root / "dir")), f"cannot read {root / 'dir'}: Is a directory"),
        (lambda: workspace.read(str(root)), f"not a file: {root}"),
        (lambda: workspace.read(str(root / "loop")), f"too many levels of symbolic links: {root / 'loop'}"),
        (lambda: workspace.read(str(root) + "/a\0b"), f"path contains a NUL character: {str(root) + '/a' + chr(0) + 'b'!r}"),
        (lambda: workspace.read(str(root / "file" / "below")), f"cannot read {root / 'file' / 'below'}: Not a directory"),
        (lambda: workspace.write(str(root / "dir"), "x"), f"cannot write {root / 'dir'}: Is a directory"),
        (lambda: workspace.write(str(root / "file" / "below"), "x"), f"cannot write {root / 'file' / 'below'}: Not a directory"),
    ]
    for call, message in cases:
        with pytest.raises(WorkspaceError) as info:
            call()
        assert str(info.value) == message


def test_writes_create_directories_replace_atomically_and_keep_permissions(ws):
    root, workspace = ws
    workspace.write(str(root / "new" / "deep" / "a.txt"), "one")
    assert (root / "new" / "deep" / "a.txt").read_text() == "one"
    os.chmod(root / "new" / "deep" / "a.txt", 0o600)
    workspace.write(str(root / "new" / "deep" / "a.txt"), "two")
    assert (root / "new" / "deep" / "a.txt").read_text() == "two"
    assert stat.S_IMODE(os.stat(root / "new" / "deep" / "a.txt").st_mode) == 0o600
    assert os.listdir(root / "new" / "deep") == ["a.txt"]  # no temporary file left
    workspace.close()
    with pytest.raises(WorkspaceError, match="is closed"):
        workspace.read(str(root / "new" / "deep" / "a.txt"))


SWAPPER = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    a, b = (p.encode() for p in sys.argv[1:3])
    exchange = getattr(libc, "renameat2", None)
    print("ready", flush=True)
    while True:
        if exchange is not None:
            exchange(-100, a, -100, b, 2)  # renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
        else:  # not atomic, still a race
            os.rename(a, a + b".t"); os.rename(b, a); os.rename(a + b".t", b)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_component_swapped_for_a_symlink_never_leads_out(tmp_path):
    """A hostile agent exchanges a directory of the path with a symlink to the outside, atomically and
    in a loop, while the workspace serves thousands of reads and writes: not one escapes."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (root / "d" / "f.txt").write_text("inside")
    (outside / "f.txt").write_text("SECRET")
    (root / "s").symlink_to(outside)
    workspace = Workspace(str(root))
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(root / "d"), str(root / "s")],
                               stdout=subprocess.PIPE)
    seen = {"inside": 0, "refused": 0}
    try:
        assert swapper.stdout.readline() == b"ready\n"
        for i in range(3000):
            try:
                text = workspace.read(str(root / "d" / "f.txt"))
            except WorkspaceError:
                seen["refused"] += 1
            else:
                assert text == "inside"
                seen["inside"] += 1
            try:
                workspace.write(str(root / "d" / f"w{i % 7}.txt"), "written")
            except WorkspaceError:
                pass
    finally:
        swapper.kill()
        swapper.wait()
        workspace.close()
    assert sorted(os.listdir(outside)) == ["f.txt"] and (outside / "f.txt").read_text() == "SECRET"
    assert seen["inside"] > 0 and seen["refused"] > 0  # the race really ran both ways


def bytes_read() -> int:
    """What this process has read so far (``rchar`` of /proc/self/io: every read(2), whatever the file)."""
    with open("/proc/self/io") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split()[1])


def test_a_line_range_of_a_huge_sparse_file_reads_only_those_lines(ws):
    """Issue 41.8: ``line``/``limit`` read the file only up to the last line asked for (a 2 GB sparse file
    was read whole, +4.1 GB of memory)."""
    root, workspace = ws
    big = root / "sparse.log"
    with open(big, "wb") as handle:
        handle.write(b"first\nsecond\nthird\n")
        handle.truncate(256 * 1024 * 1024)  # a hole of zeros after the three lines
    before = bytes_read()
    assert workspace.read(str(big), line=2, limit=1) == "second\n"
    assert workspace.read(str(big), line=1, limit=2) == "first\nsecond\n"
    assert workspace.read(str(big), limit=0) == ""
    assert bytes_read() - before < 1024 * 1024  # the lines, not the 256 MB behind them


def test_reads_past_the_cap_are_refused_naming_it(ws):
    root, workspace = ws
    big = root / "big.txt"
    with open(big, "wb") as handle:
        handle.write(b"x" * 5000 + b"\nshort\n")
    assert workspace.read(str(big), line=2, max_bytes=5010) == "short\n"
    for asked in ({}, {"line": 2, "limit": 1}, {"line": 1, "limit": 1}):
        with pytest.raises(WorkspaceError) as refused:
            workspace.read(str(big), max_bytes=4096, **asked)
        assert str(refused.value) == too_large(str(big), 4096)
    assert str(refused.value) == (f"cannot read {big}: the lines asked for go past the read limit of 4096 bytes "
                                  "(max_read_bytes= of tn.AcpAgent); ask for fewer lines (line=, limit=)")
    assert MAX_READ_BYTES == 16 * 1024 * 1024
