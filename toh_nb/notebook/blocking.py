"""A sync ``tn.Hub`` call made on a thread whose asyncio loop is running says so, once per process.

Why: the sync facade waits for the portal's loop by blocking its caller's thread. Inside ``async def``
in a script that thread is running an event loop, which then stands still for the whole call (a 10 ms
ticker ticked 0 times during a 0.23 s ``hub.run``), and nothing says why. In a Jupyter kernel the cell's
loop is the kernel's and the hub already serves what must run meanwhile (``kernel_pump``), so nothing is
said there. Elsewhere one ``RuntimeWarning`` points to ``tn.AsyncHub``, at the caller's own line.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import warnings

BLOCKING_WARNING = (
    "tn.Hub blocks this thread's running asyncio event loop until each call returns: its other tasks, "
    "timers and servers stand still meanwhile. In async code use tn.AsyncHub "
    "(async with tn.AsyncHub(...) as hub: await hub.run(...)); this warning is shown once per process")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: whether this process has had its answer (warned, or found to be a kernel): later calls check nothing
_decided = False


def decided() -> bool:
    """Whether this process has had its answer (warned, or found to be a kernel)."""
    return _decided


def in_kernel() -> bool:
    """Whether this process is a Jupyter (IPython) kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside toh_nb, seen from the function calling this one."""
    frame, level = inspect.currentframe(), 0
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return max(level, 1)


def warn_if_blocking_a_loop() -> None:
    """Warn (once per process) when the calling thread runs an asyncio loop and is not a kernel's."""
    global _decided
    if _decided:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a plain script or a thread of its own
        return
    _decided = True
    if not in_kernel():
        warnings.warn(BLOCKING_WARNING, RuntimeWarning, stacklevel=_caller_level())
