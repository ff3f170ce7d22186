"""The launcher between toh_nb and a process it starts (an ACP agent, a stdio MCP server): the
process's whole tree dies with it.

Why: an agent (or a server) may start helpers that leave its process group (``setsid``) or daemonise (double fork);
killing the agent's group then misses them, they outlive ``hub.close()``, and while one holds the
agent's stdout nobody sees the agent die. So the agent is not our child but the launcher's, and the
launcher is a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): every orphan of the tree is
re-parented to it, however it detached, so it can find (``/proc/*/stat`` parent links) and kill all
of it.

It relays nothing of the protocol: the agent inherits the launcher's stdin, stdout and stderr (toh_nb's
pipes) and the launcher lets go of its own copies of stdin and stdout. It talks to toh_nb only over one
socket (the *lifeline*, its fd number is ``argv[1]``):

- toh_nb → launcher: one JSON line ``{"command", "env", "cwd", "grace"}``, then nothing; end of file on
  the lifeline (toh_nb closed it, or toh_nb's process died) means "end the tree now";
- launcher → toh_nb: ``started <pid>`` or ``failed <json {errno, strerror, message}>``, and then
  ``exited <returncode>`` (negative: killed by that signal) the moment the agent itself exits.

When the agent exits, or toh_nb says so, or the launcher gets SIGTERM/SIGHUP/SIGINT (or toh_nb's
thread dies: ``PR_SET_PDEATHSIG``), every process below the launcher gets SIGTERM, ``grace`` seconds
later SIGKILL (repeated until none is left), and the launcher exits with the agent's status.

*Stdio mode* (``python -I -S launcher.py --stdio PARENT GRACE -- COMMAND...``, what
:func:`stdio_command` builds) is for a process that another library starts, such as the MCP SDK's stdio
client, which gives it no lifeline: the command, its environment and its working directory are the
launcher's own; a command that cannot be started is told on stderr as one ``toh_nb launcher: failed
<json>`` line (exit status 127; :func:`start_failure` reads it back), one that runs as ``toh_nb
launcher: started <pid>`` (:func:`started_pid`); and the tree ends when the process
exits, when the launcher gets SIGTERM/SIGHUP/SIGINT (the SDK's shutdown signals the process group), or
when toh_nb's thread dies. ``GRACE`` must stay below the other library's own wait before it SIGKILLs the
group, so the launcher is never killed before it has killed the helpers that left that group.

Standard library only, and run as a file (``python -I -S launcher.py FD``): it imports nothing of
toh_nb, so it starts in milliseconds whatever the environment holds. ``toh_nb.providers.acp.process``
and ``toh_nb.mcp.connection`` both use it (the old path ``toh_nb.providers.acp.launcher`` is a shim).
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

#: this file, run by path (``python -I -S LAUNCHER ...``)
LAUNCHER = os.path.abspath(__file__)
#: the first word of stdio mode's failure line on stderr
FAILED = "toh_nb launcher: failed "
#: stdio mode's first stderr line once the command runs, with its pid (:func:`started_pid` reads it)
STARTED = "toh_nb launcher: started "

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: seconds between looks while the tree is given its grace after SIGTERM
POLL = 0.02
#: SIGKILL rounds at most (a fork bomb loses a few rounds; this only bounds a pathological case)
KILL_ROUNDS = 500


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is no such call (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                          ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every living process below ``root`` (by the parent links of ``/proc``); [] without ``/proc``."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields and fields[0] in (b"Z", b"X"):
            continue  # a zombie: dead already, reaped below
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.append(pid)
            stack.append(pid)
    return found


def stdio_command(command: list[str], grace: float) -> list[str]:
    """``command`` run under the launcher in stdio mode (see the module docstring); ``grace``: the
    seconds between SIGTERM and SIGKILL of the tree. Run it from this process (the launcher ends at
    once when its parent is not the process that built the command)."""
    return [sys.executable, "-I", "-S", LAUNCHER, "--stdio", str(os.getpid()), repr(float(grace)), "--", *command]


def start_failure(stderr: str) -> "dict | None":
    """What stdio mode's failure line in ``stderr`` says (``errno``, ``strerror``, ``filename``,
    ``message``), or None when there is none."""
    for line in stderr.splitlines():
        if line.startswith(FAILED):
            try:
                data = json.loads(line[len(FAILED):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def started_pid(stderr: str) -> "int | None":
    """The pid stdio mode's ``started`` line in ``stderr`` names, or None."""
    for line in stderr.splitlines():
        if line.startswith(STARTED) and line[len(STARTED):].strip().isdigit():
            return int(line[len(STARTED):])
    return None


class Launcher:
    def __init__(self, lifeline: int | None) -> None:
        self.lifeline = lifeline
        self.agent: int | None = None
        self.status: int | None = None  # the agent's return code, once it exited
        self.stop: int | None = None  # the signal that asked us to end

    def send(self, line: str) -> None:
        if self.lifeline is None:  # stdio mode: nobody listens but for a failure (see run)
            return
        try:
            os.write(self.lifeline, (line + "\n").encode())
        except OSError:  # toh_nb is gone: nobody to tell
            pass

    def reap(self) -> None:
        """Collect every exited child (adopted orphans included), noting the agent's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.agent and self.status is None:
                self.status = os.waitstatus_to_exitcode(status)

    def kill_tree(self, grace: float) -> None:
        me = os.getpid()
        for pid in descendants(me):
            _signal(pid, signal.SIGTERM)
        if not os.path.isdir("/proc"):  # no way to walk the tree: at least the group
            _signal(-me, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self.reap()
            if not descendants(me):
                return
            time.sleep(POLL)
        for _ in range(KILL_ROUNDS):
            self.reap()
            left = descendants(me)
            if not left:
                return
            for pid in left:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.001)

    def run(self, config: dict | None = None) -> int:
        if config is None:
            config = _read_config(self.lifeline)
        if config is None:
            return 2  # toh_nb went away before saying what to run
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up byte is written
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._stop)
        try:  # caught signals are reset to the default in the agent; nothing here is ignored
            child = subprocess.Popen(config["command"], env=config["env"], cwd=config["cwd"], close_fds=True)
        except OSError as error:
            detail = json.dumps({"errno": error.errno, "strerror": error.strerror,
                                 "filename": error.filename, "message": str(error)})
            if self.lifeline is None:
                os.write(2, (FAILED + detail + "\n").encode())
            self.send("failed " + detail)
            return 127
        self.agent = child.pid
        if self.lifeline is None:  # stdio mode: the pid goes where the starter reads the server's stderr
            os.write(2, f"{STARTED}{child.pid}\n".encode())
        self.send(f"started {child.pid}")
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)  # let go of the agent's pipes: only the agent (and its helpers) hold them
        os.dup2(devnull, 1)
        os.close(devnull)
        while self.stop is None:
            self.reap()
            if self.status is not None:
                break
            try:
                ready, _, _ = select.select([wake_r] if self.lifeline is None else [self.lifeline, wake_r], [], [])
            except InterruptedError:  # pragma: no cover - retried by Python, kept for clarity
                continue
            if wake_r in ready:
                os.read(wake_r, 4096)
            if self.lifeline in ready:
                try:
                    data = os.read(self.lifeline, 4096)
                except OSError:
                    data = b""
                if not data:  # toh_nb closed its end (or died): end the tree
                    break
        if self.status is not None:  # the agent ended on its own: say so before tidying up its helpers
            self.send(f"exited {self.status}")
            self.kill_tree(float(config.get("grace", 3.0)))
        else:
            self.kill_tree(float(config.get("grace", 3.0)))
            self.reap()
            if self.status is not None:
                self.send(f"exited {self.status}")
        child.returncode = self.status  # reaped here, not by Popen
        if self.status is None:
            return 0
        return self.status if self.status >= 0 else 128 - self.status

    def _stop(self, signum: int, frame: object) -> None:
        self.stop = signum


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_config(fd: int) -> dict | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--stdio":  # --stdio PARENT GRACE -- COMMAND...
        if len(argv) < 5 or argv[3] != "--":
            os.write(2, b"usage: launcher.py --stdio PARENT GRACE -- COMMAND...\n")
            return 2
        lifeline, parent = None, int(argv[1])
        config = {"command": argv[4:], "env": None, "cwd": None, "grace": float(argv[2])}
    else:
        lifeline, parent, config = int(argv[0]), int(argv[1]), None
        os.set_inheritable(lifeline, False)  # the agent must not hold it: its end of file is our signal
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # toh_nb died before the death signal was armed
        return 2
    return Launcher(lifeline).run(config)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
