"""Tree clicks during a blocking hub call on ipykernel 6, which has no subshells (issue 27 §1).

On ipykernel >= 7.4 the tree's messages go to a kernel subshell while a cell runs
(:mod:`toh_nb.notebook.kernel_routing`). ipykernel 6 has one thread for every shell message: a click
waits in the shell socket until the cell ends. While a call of the sync facade blocks the kernel's
main thread (``hub.run``, a foreground ``hub.spawn``, ``kid.wait()``, ``job.output(wait=True)``, …:
each waits in :meth:`toh_nb.notebook.portal.Portal.call`, which runs the hooks registered with
:func:`toh_nb.notebook.portal.on_wait` every ``POLL`` seconds), :func:`pump`:

1. takes the messages waiting in the kernel's shell stream through the stream's own ``flush()``
   (pyzmq's public way to drain a ``ZMQStream``, which keeps the stream's poll state right), with the
   stream's receive callback swapped for a list for that moment and put back at once;
2. handles, in order, the ``comm_msg`` messages of the trees' own comms (the comm's ``handle_msg``:
   what the kernel's comm manager would call; no status is published, as ipykernel 7.4 does for comm
   messages it handles while a cell runs, so the front-end keeps showing the cell busy);
3. hands every other message (cells, ``comm_open``/``comm_close``, other widgets, completions …), in
   the order it arrived, to the stream's own callback, which queues it in the kernel's message queue
   exactly as the kernel would have: nothing is lost or reordered and no cell runs re-entrantly.

Reading only the envelope (``deserialize(content=False)``) leaves the message's signature unrecorded,
so the kernel still accepts it later. ``input()`` uses the stdin socket, which is not touched. Only a
wait on the kernel's main thread pumps, never a nested one; a click that arrived before the cell
started waiting is already in the kernel's queue and runs after the cell, as before.

Every touch of the kernel's and pyzmq's insides (the stream's current receive callback,
``ZMQStream._recv_callback``, read so that exactly it is put back; the session's envelope reading) is in
:mod:`toh_nb.notebook.kernel_adapter`, behind its :data:`~toh_nb.notebook.kernel_adapter.PUMP` version
check: only ipykernel 6 is pumped (ipykernel 7 reads the shell socket on its own thread), with a pyzmq
the adapter knows; elsewhere nothing is pumped and a click waits for the cell. ``TOH_NB_BUSY_CLICKS=off``
turns this off too.
"""

from __future__ import annotations

import collections
import logging
import threading
import weakref
from typing import Any

from . import kernel_adapter as adapter
from . import portal as portals
from .kernel_routing import enabled

log = logging.getLogger("toh_nb")


class _Pump:
    def __init__(self) -> None:
        self.comms: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # comm id -> the tree's comm
        self.kernel: Any = None
        self.busy = False  # a pump runs (a handler's own wait does not pump again)
        self.served = 0  # comm messages handled during waits
        self.queued = 0  # other messages handed back to the kernel's queue
        self.hooked = False


_PUMP = _Pump()


def register(comm: Any) -> bool:
    """Serve ``comm``'s (a tree's) messages during blocking hub calls, if this is an ipykernel 6
    kernel; True if so. A no-op elsewhere."""
    kernel = adapter.pumpable_kernel()
    comm_id = getattr(comm, "comm_id", None)
    if kernel is None or not isinstance(comm_id, str):
        return False
    _PUMP.kernel = kernel
    _PUMP.comms[comm_id] = comm
    if not _PUMP.hooked:
        _PUMP.hooked = True
        portals.on_wait(pump)
    return True


def status() -> dict:
    """``comms`` (how many trees are served), ``served`` (their messages handled during waits) and
    ``queued`` (other messages handed back to the kernel's queue)."""
    return {"comms": len(_PUMP.comms), "served": _PUMP.served, "queued": _PUMP.queued}


def pump() -> None:
    """Handle the trees' waiting comm messages now (see the module docstring). Called by a blocked
    :meth:`Portal.call` on its own thread; does nothing off the main thread or when nothing waits."""
    state = _PUMP
    kernel = state.kernel
    if (kernel is None or state.busy or not state.comms or not enabled()
            or threading.current_thread() is not threading.main_thread()):
        return
    original = adapter.shell_callback(kernel)
    if original is None:
        return
    state.busy = True
    taken: collections.deque = collections.deque()
    try:
        adapter.drain_shell(kernel, taken.append, original)
    finally:
        try:
            while taken:
                raw = taken.popleft()
                if not _serve(kernel, raw):
                    state.queued += 1
                    original(raw)  # the kernel's own path: its queue, in arrival order
        finally:
            while taken:  # interrupted (■) half-way: the rest still reaches the kernel, in order
                state.queued += 1
                original(taken.popleft())
            state.busy = False


def _serve(kernel: Any, raw: list) -> bool:
    """Handle ``raw`` if it is a ``comm_msg`` of a tree's comm; False (untouched) otherwise."""
    try:
        peeked = adapter.comm_message_of(kernel, raw)  # a peek: the signature stays unused
        if peeked is None:
            return False
        frames, comm_id = peeked
        comm = _PUMP.comms.get(comm_id)
        # a closed tree's comm is no longer the kernel's: its message goes the kernel's way
        if comm is None or adapter.kernels_comm(kernel, comm_id) is not comm:
            return False
    except Exception:  # not ours to judge: the kernel reports what is wrong with it
        return False
    try:
        msg = adapter.decode(kernel, frames)
        comm.handle_msg(msg)
        _PUMP.served += 1
    except Exception:  # a bad message from the page is the tree's to report, never the cell's
        log.exception("toh_nb: a tree message could not be handled during a blocking call")
    return True
