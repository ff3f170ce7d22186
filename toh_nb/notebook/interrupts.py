"""What a kernel interrupt (■) during a blocking facade call says.

A notebook user who presses ■ while ``hub.run``, a foreground ``spawn``, ``job.output(wait=True)`` or
``child.wait()`` blocks must learn two things: what was stopped and what still runs. The portal
cancels the call's own work (see :mod:`toh_nb.notebook.portal`); this module turns the bare
``KeyboardInterrupt`` that surfaces through the portal's internals into an :class:`Interrupted` carrying
one line (``root turn aborted; still running: job subagent-1``), raised from the facade method so no
portal frames show, and rendered by IPython as that line alone (``_render_traceback_``).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt that says what happened and what still runs (still a KeyboardInterrupt,
    so ``except KeyboardInterrupt`` and the kernel treat it as one)."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


def still_running(async_hub: Any) -> str:
    """``still running: job subagent-1, agent-3`` or ``nothing else is running``.

    Read from the caller's thread without waiting for the loop (it may be busy cancelling): the hub's
    :attr:`~toh_nb.hub.AsyncHub.activity`, informational only.
    """
    activity = async_hub.activity
    root = async_hub.root
    agents = [agent_id for agent_id in activity.running_agents
              if agent_id != root and agent_id not in activity.job_children]
    names = [f"job {job_id}" for job_id in activity.active_jobs] + agents
    if not names:
        return "nothing else is running"
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"still running: {shown} (hub.agents() and hub.jobs() list them)"


@contextmanager
def explained(describe: Callable[[], str]) -> Iterator[None]:
    """Turn a KeyboardInterrupt inside the block into :class:`Interrupted` with ``describe()``'s line."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        try:
            line = describe()
        except Exception as error:  # the explanation must never hide the interrupt
            line = f"interrupted ({type(error).__name__} while describing what still runs)"
        raise Interrupted(line) from None
