"""The progress line shown while a notebook cell waits: quiet in scripts, a widget in a kernel."""

from __future__ import annotations

import time
import types

import ipywidgets as widgets
import pytest

from toh_nb.notebook import progress
from toh_nb.notebook.progress import ProgressLine, QuietLine, in_notebook, waiting


def test_quiet_outside_a_kernel(capsys):
    assert not in_notebook()  # pytest has no IPython kernel
    with waiting("waiting for subagent-1") as line:
        line.update("running")
    assert isinstance(line, QuietLine) and not line.shown
    assert line.text == "running"
    assert capsys.readouterr() == ("", "")


def test_detects_a_kernel(monkeypatch):
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
    assert in_notebook()
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=None))
    assert not in_notebook()  # a terminal IPython has no kernel
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert not in_notebook()


class FakeHandle:
    def __init__(self, bundle):
        self.bundle = bundle
        self.updates = []

    def update(self, obj, raw=False):
        self.updates.append((obj, raw))


@pytest.fixture
def fake_display(monkeypatch):
    import IPython
    import IPython.display

    shown: list[FakeHandle] = []

    def display(obj, raw=False, display_id=None):
        assert raw and display_id is True
        handle = FakeHandle(obj)
        shown.append(handle)
        return handle

    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
    monkeypatch.setattr(IPython.display, "display", display)
    return shown


def test_in_a_kernel_a_widget_ticks_and_is_removed_after(fake_display, monkeypatch):
    monkeypatch.setattr(progress, "CLOSE_DELAY", 0.3)
    status = {"value": "running"}
    with waiting("waiting for subagent-1", status=lambda: status["value"], interval=0.02, show_after=0) as line:
        assert isinstance(line, ProgressLine) and line.shown
        assert isinstance(line.bar, widgets.FloatProgress)
        time.sleep(0.15)
        assert line.ticks >= 2
        assert "waiting for subagent-1" in line.label.value and "running" in line.label.value
        status["value"] = "stopping"
        time.sleep(0.1)
        assert "stopping" in line.label.value
    (handle,) = fake_display
    # displayed without text/plain: stored notebook outputs never depend on whether a wait was long
    assert "text/plain" not in handle.bundle
    assert handle.bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    # closed after: the ticker stopped and the display replaced by an empty one at once; the widget
    # models close a little later, once a front end has surely dropped their views
    assert handle.updates == [({}, True)]
    assert not line.ticking
    assert line.box.comm is not None
    deadline = time.monotonic() + progress.CLOSE_DELAY + 2
    while line.box.comm is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert line.box.comm is None and line.bar.comm is None
    ticks = line.ticks
    time.sleep(0.06)
    assert line.ticks == ticks


def test_closed_even_when_the_wait_raises(fake_display):
    with pytest.raises(KeyboardInterrupt):
        with waiting("waiting", interval=0.02, show_after=0) as line:
            raise KeyboardInterrupt
    assert fake_display[0].updates == [({}, True)]
    assert not line.ticking


def test_a_failing_status_probe_does_not_break_the_wait(fake_display):
    def broken():
        raise RuntimeError("boom")

    with waiting("waiting", status=broken, interval=0.02, show_after=0) as line:
        time.sleep(0.08)
    assert line.text == "(RuntimeError)"


def test_enabled_forces_quiet(fake_display):
    with waiting("waiting", enabled=False) as line:
        pass
    assert isinstance(line, QuietLine) and fake_display == []


def test_elapsed_formatting():
    assert progress.format_elapsed(1.25) == "1.2 s"
    assert progress.format_elapsed(75) == "1 min 15 s"


def poll(predicate, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_quick_waits_leave_no_output_and_long_ones_of_one_cell_share_one(fake_display, monkeypatch):
    import IPython

    shell = types.SimpleNamespace(kernel=object(), execution_count=7)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    monkeypatch.setattr(progress, "_CELL", [None, None])
    lines = []
    for _ in range(3):  # a loop of quick calls in one cell
        with waiting("waiting", interval=0.02) as line:
            lines.append(line)
    assert fake_display == []  # nothing displayed at all: the saved cell has no output from them
    assert all(line.shown and line.box is None for line in lines)  # no widget models were made
    with waiting("waiting", interval=0.02, show_after=0.05):  # a long one displays its widgets
        poll(lambda: fake_display, "the progress line's display")
    (handle,) = fake_display
    assert "application/vnd.jupyter.widget-view+json" in handle.bundle and "text/plain" not in handle.bundle
    assert handle.updates == [({}, True)]  # emptied when the wait ended
    with waiting("waiting", interval=0.02, show_after=0.05):  # another long wait of the cell reuses it
        poll(lambda: len(handle.updates) == 2, "the reused display")
    assert len(fake_display) == 1
    assert "application/vnd.jupyter.widget-view+json" in handle.updates[1][0] and handle.updates[2] == ({}, True)
    shell.execution_count = 8  # the next cell gets its own output
    with waiting("waiting", interval=0.02, show_after=0.05):
        poll(lambda: len(fake_display) == 2, "the next cell's display")
    assert fake_display[1].updates == [({}, True)]

