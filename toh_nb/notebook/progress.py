"""A small progress line shown while a notebook cell waits (``job.output(wait=True)``, ``child.wait()``).

::

    from toh_nb.notebook.progress import waiting

    with waiting("waiting for subagent-1", status=lambda: job.status) as line:
        ...                       # block; the line shows the elapsed time and status() every tick
        line.update("almost")     # optional: set the status text yourself

In a notebook (an IPython *kernel* is running and ipywidgets is importable) this displays a progress bar
with the description, the elapsed time and the status text, updated by a daemon thread every
``interval`` seconds while the block runs, and removes it when the block exits (normally or by an
exception, including KeyboardInterrupt). Anywhere else (scripts, plain IPython, pytest) it shows
nothing and costs next to nothing.

Stored notebooks stay clean and deterministic: nothing is displayed until a wait has lasted
``SHOW_AFTER`` (0.3 s), so a quick wait leaves no output at all in the saved file. A longer one shows
the line without a ``text/plain`` part and, when it ends, empties it (a display with no data: nothing
that nbval compares, nothing nbconvert or GitHub shows). All the waits of one cell share that one
output (a loop of long waits leaves one empty output, not one per wait). Removing an output outright
would take ``clear_output()``, which also erases everything else the cell printed, so it is not used.

Why our own rather than ``tqdm.auto`` (measured, issue 45): tqdm's bar froze during a blocking wait and
left a widget plus a text line in the saved notebook; this line keeps ticking and leaves one empty output.
"""

from __future__ import annotations

import contextvars
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .display import format_elapsed

__all__ = ["in_notebook", "waiting", "ProgressLine", "QuietLine"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (``IPython.get_ipython()`` has a kernel) with ipywidgets available."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


class QuietLine:
    """What :func:`waiting` yields outside a notebook: accepts the same calls and shows nothing."""

    shown = False

    def __init__(self, description: str = "") -> None:
        self.description = description
        self.text = ""

    def update(self, text: str) -> None:
        self.text = str(text)

    def close(self) -> None:
        pass


class ProgressLine:
    """A progress bar (pulsing: the total is unknown) + a label, ticked by a daemon thread.

    ``show_after``: seconds before the widgets are built and displayed (by the ticker thread, in the
    cell's context so the output lands in the waiting cell). A call that ends sooner — a loop of a
    thousand quick ``spawn`` calls — displays nothing and costs no widget models.
    """

    shown = False

    def __init__(self, description: str, status: Callable[[], Any] | None = None, interval: float = 0.25,
                 show_after: float = 0.0) -> None:
        self.description = description
        self.text = ""
        self._status = status
        self._interval = interval
        self._show_after = show_after
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self._lock = threading.Lock()  # orders the ticker's first display against close()
        self._cell: Any = None  # the waiting cell's execution count
        self.ticks = 0
        self.bar: Any = None
        self.label: Any = None
        self.box: Any = None
        if show_after <= 0:
            self._build()

    def _build(self) -> None:
        import ipywidgets as widgets

        self.bar = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, bar_style="info",
                                         layout=widgets.Layout(width="160px"))
        self.label = widgets.HTML()
        self.box = widgets.HBox([self.bar, self.label], layout=widgets.Layout(align_items="center"))
        self._render()

    def _bundle(self) -> dict:
        view = self.box._repr_mimebundle_()
        return {k: v for k, v in (view or {}).items() if k != "text/plain"}

    def _render(self) -> None:
        import html

        if self.label is None:
            return
        parts = [self.description, format_elapsed(time.monotonic() - self._started)]
        if self.text:
            parts.append(self.text)
        self.label.value = f"<span style='color:#555'>{html.escape(' · '.join(parts))}</span>"

    def tick(self) -> None:
        self.ticks += 1
        if self._status is not None:
            try:
                value = self._status()
            except Exception as error:  # a status probe never breaks the wait
                value = f"({type(error).__name__})"
            self.text = "" if value is None else str(value)
        if self.bar is not None:
            self.bar.value = (self.ticks % 20) / 20.0
        self._render()

    def update(self, text: str) -> None:
        self.text = str(text)
        self._render()

    def show(self) -> None:
        """Start the line for the current cell (call from the cell's thread): displayed at once when
        ``show_after`` is 0, else by the ticker thread once the wait has lasted ``show_after``."""
        self._cell = _execution_count()
        self.shown = True
        if self.box is not None:
            self._display()
        context = contextvars.copy_context()  # the cell's output context (ipykernel's parent header)
        self._thread = threading.Thread(target=context.run, args=(self._run,), name="toh-nb-progress", daemon=True)
        self._thread.start()

    def _display(self) -> None:
        """Show the widgets: in this cell's progress output if an earlier wait of the cell made one."""
        from IPython.display import display

        handle = _cell_handle(self._cell)
        if handle is not None:
            handle.update(self._bundle(), raw=True)
            self._handle = handle
        else:
            self._handle = display(self._bundle(), raw=True, display_id=True)
            _remember_cell_handle(self._cell, self._handle)

    def _run(self) -> None:
        if self.box is None:
            if self._stop.wait(self._show_after):
                return  # over before it was worth showing: no output, no widgets
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self._build()
                    self._display()
                except Exception:
                    return
        while not self._stop.wait(self._interval):
            try:
                self.tick()
            except Exception:
                return

    @property
    def ticking(self) -> bool:
        """Whether the ticker thread runs (from :meth:`start` until :meth:`close` has stopped it)."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        with self._lock:  # a display under way finishes first; none starts after this
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        if self.box is None:
            self._handle = None
            return  # never shown: the cell has no output from it
        if self._handle is not None:
            try:
                self._handle.update({}, raw=True)  # leave an empty display, not a dead widget view
            except Exception:
                pass
            self._handle = None
        # Closing the widget models at once races the front end, which may still be building the views
        # of a wait that ended within milliseconds ("Cannot read properties of null (reading 'widgets')"
        # in JupyterLab); close them once the front end has surely dropped the emptied display.
        timer = threading.Timer(CLOSE_DELAY, _close_widgets, args=((self.box, self.bar, self.label),))
        timer.daemon = True
        timer.start()


#: seconds between emptying a finished progress line and closing its widget models
CLOSE_DELAY = 5.0
#: seconds a call runs before its progress line's widgets are built and shown
SHOW_AFTER = 0.3

# (execution count, display handle) of the cell that last showed a progress line: every wait of one
# cell (a loop of twelve ``child.wait()``) shares one output instead of leaving one empty output each
_CELL: list = [None, None]


def _execution_count() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return None if shell is None else getattr(shell, "execution_count", None)


def _cell_handle(count: Any) -> Any:
    return _CELL[1] if count is not None and _CELL[0] == count else None


def _remember_cell_handle(count: Any, handle: Any) -> None:
    _CELL[0], _CELL[1] = count, handle


def _close_widgets(widgets_to_close: tuple) -> None:
    for widget in widgets_to_close:
        try:
            widget.close()
        except Exception:
            pass


@contextmanager
def waiting(description: str = "waiting", *, status: Callable[[], Any] | None = None, interval: float = 0.25,
            enabled: bool | None = None, show_after: float = SHOW_AFTER) -> Iterator[ProgressLine | QuietLine]:
    """Show a progress line while the ``with`` block runs, in a notebook only.

    ``description`` is the fixed text; ``status`` an optional zero-argument callable polled every
    ``interval`` seconds from the ticker thread (keep it to reading plain attributes, such as
    ``job.status``); ``enabled`` forces the display on or off (default: :func:`in_notebook`);
    ``show_after``: seconds before anything is displayed (a quicker wait leaves no output at all).
    Yields the line (``.update(text)`` sets the status text yourself; ``.shown`` tells whether anything
    was displayed).
    """
    show = in_notebook() if enabled is None else bool(enabled)
    line: ProgressLine | QuietLine
    if show:
        try:
            line = ProgressLine(description, status=status, interval=interval, show_after=show_after)
            line.show()
        except Exception:
            line = QuietLine(description)
    else:
        line = QuietLine(description)
    try:
        yield line
    finally:
        line.close()
