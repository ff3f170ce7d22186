"""A sync ``tn.Hub`` used inside a script's running asyncio loop warns once per process (the loop stands
still while it waits); in a kernel, or without a running loop, nothing is said."""

from __future__ import annotations

import asyncio
import warnings

import pytest

import toh_nb as tn
from toh_nb.notebook import blocking

MESSAGE = ("tn.Hub blocks this thread's running asyncio event loop until each call returns: its other tasks, "
           "timers and servers stand still meanwhile. In async code use tn.AsyncHub "
           "(async with tn.AsyncHub(...) as hub: await hub.run(...)); this warning is shown once per process")


@pytest.fixture
def undecided(monkeypatch):
    monkeypatch.setattr(blocking, "_decided", False)


def hub_calls_inside_a_loop() -> list[warnings.WarningMessage]:
    async def main():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
                assert hub.run("one").text == "ok"
                assert hub.spawn("two").text == "ok"
            with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as again:
                again.run("three")
        return [w for w in caught if issubclass(w.category, RuntimeWarning)]

    return asyncio.run(main())


def test_a_hub_inside_a_running_loop_warns_once_at_the_callers_line(undecided, monkeypatch):
    monkeypatch.setattr(blocking, "in_kernel", lambda: False)
    caught = hub_calls_inside_a_loop()
    assert [str(w.message) for w in caught] == [MESSAGE]
    assert caught[0].filename == __file__  # the user's line (the hub's construction), not toh_nb's


def test_a_kernel_or_no_running_loop_says_nothing(undecided, monkeypatch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            hub.run("no loop here")
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    assert blocking.decided() is False  # still watching: a later call inside a loop would warn
    monkeypatch.setattr(blocking, "in_kernel", lambda: True)
    assert hub_calls_inside_a_loop() == []


def test_in_kernel_is_false_in_a_plain_process():
    assert blocking.in_kernel() is False
