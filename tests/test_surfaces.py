"""The sync twin mirrors the async face: same public names, same parameters, on Hub, Child and Job, and one
rule for which methods are coroutines (as httpx's ``Client``/``AsyncClient``): on the async face every
public method that reads, acts on or waits for the engine is a coroutine (``await hub.list_agents()``),
``astream`` is an async iterator, and only properties (and the ``from_config`` constructor) are plain;
on the sync face nothing is a coroutine.

Differences are listed here on purpose (and only here): what exists because one side is async (the
stream's name, the portal, the loop-thread view), and the names kept one release with a deprecation.
"""

from __future__ import annotations

import inspect
import warnings

import pytest

import toh_nb as tn
from toh_nb.jobs.texts import kill_already_finished

#: engine internals and helpers kept under their old public names for one release (DeprecationWarning)
DEPRECATED = {"AsyncHub": {"runtime", "job_registry", "store", "event_filter", "wait_settled", "root_agent"}}
ASYNC_ONLY = {
    "AsyncHub": {"astream",  # Hub.stream
                 "view",  # plain reads for code on the hub's loop thread (the notebook's tree); a sync caller
                          # is on another thread, where those reads would race the engine: it uses the methods
                 *DEPRECATED["AsyncHub"]},
}
#: twins whose parameters differ on purpose, and why
SIGNATURES_DIFFER = {
    "from_config": "Hub.from_config(config, *, loop=...): the sync face's loop choice is no field of HubConfig",
}
SYNC_ONLY = {
    "Hub": {"stream",  # AsyncHub.astream
            "async_hub", "portal", "loop",  # the portal plumbing of the sync twin
            "tree", "graph"},  # the live widget and the Mermaid picture: notebook only
}
#: plain members of the async face that are no coroutines by the rule's own terms
PLAIN = {"astream",  # an async iterator: ``async for ev in hub.astream()``
         "from_config",  # a constructor
         "event_filter"}  # deprecated, internal


def surface(cls) -> dict:
    out = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(inspect.getattr_static(cls, name), property):
            out[name] = "property"
        elif callable(member):
            out[name] = [(p.name, p.kind) for p in inspect.signature(member).parameters.values() if p.name != "self"]
    return out


def methods(cls) -> dict:
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and callable(member) and not isinstance(inspect.getattr_static(cls, name), property)}


PAIRS = [(tn.AsyncHub, tn.Hub), (tn.AsyncChild, tn.Child), (tn.AsyncJob, tn.Job)]


def test_sync_and_async_faces_mirror_each_other():
    for async_cls, sync_cls in PAIRS:
        a, s = surface(async_cls), surface(sync_cls)
        assert set(a) - set(s) == ASYNC_ONLY.get(async_cls.__name__, set()), async_cls.__name__
        assert set(s) - set(a) == SYNC_ONLY.get(sync_cls.__name__, set()), sync_cls.__name__
        for name in set(a) & set(s):
            if async_cls is tn.AsyncHub and name in SIGNATURES_DIFFER:
                continue
            assert a[name] == s[name], f"{sync_cls.__name__}.{name} differs from {async_cls.__name__}.{name}"


def test_from_config_differs_only_by_the_sync_loop_keyword():
    a = [(p.name, p.kind) for p in inspect.signature(tn.AsyncHub.from_config).parameters.values()]
    s = [(p.name, p.kind) for p in inspect.signature(tn.Hub.from_config).parameters.values()]
    assert s == a + [("loop", inspect.Parameter.KEYWORD_ONLY)]


def test_every_async_method_is_a_coroutine_and_no_sync_one_is():
    for async_cls, sync_cls in PAIRS:
        plain = [name for name, member in methods(async_cls).items()
                 if name not in PLAIN and not inspect.iscoroutinefunction(member)]
        assert plain == [], f"{async_cls.__name__}: not coroutines: {plain}"
        coroutines = [name for name, member in methods(sync_cls).items()
                      if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)]
        assert coroutines == [], f"{sync_cls.__name__}: coroutines on the sync face: {coroutines}"
    assert inspect.isasyncgenfunction(tn.AsyncHub.astream)
    assert inspect.isgeneratorfunction(tn.Hub.stream)


def test_the_readmes_async_example_awaits_the_listing_and_the_tables():
    """``await hub.list_agents(...)`` raised TypeError when it was a plain method (issue 28)."""
    import asyncio

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            kid = await hub.start("work", label="w")
            await kid.wait()
            listing = await hub.list_agents("descendants")
            rows = await hub.agents()
            assert await kid.kill() is False  # settled: a no-op
            await hub.interrupt(kid)
            return str(listing), [r["id"] for r in rows], [r["kind"] for r in await hub.transcript(kid, raw=True)][:2], \
                [r["id"] for r in await hub.jobs()], [r["kind"] for r in await hub.events()], \
                (await hub.child(kid.id)).id, str(await kid.transcript() == await hub.transcript(kid.id))

    assert asyncio.run(main()) == ("agent-1 [ready] parent=root depth=1 \u2014 w", ["root", "agent-1"], ["subagent/descriptor", "turn/start"],
                                   [], ["subagent/start", "subagent/end"], "agent-1", "True")


@pytest.mark.parametrize("name", sorted(DEPRECATED["AsyncHub"] - {"event_filter", "wait_settled"}))
def test_old_internal_names_still_answer_with_a_deprecation_warning(name):
    import asyncio

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            with pytest.warns(DeprecationWarning) as caught:
                value = getattr(hub, name)
            return value is not None, str(caught[0].message)

    present, message = asyncio.run(main())
    assert present and message.startswith(f"AsyncHub.{name} is internal and will be removed in the next release; use ")


def test_event_filter_and_wait_settled_still_work_with_a_deprecation_warning():
    import asyncio

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "done"), ids="sequential") as hub:
            kid = await hub.start("work", label="w")
            with pytest.warns(DeprecationWarning, match=r"^AsyncHub.wait_settled is internal"):
                text = await hub.wait_settled(kid.id, 10)
            with pytest.warns(DeprecationWarning, match=r"^AsyncHub.event_filter is internal"):
                keep = hub.event_filter(kid, ["turn/end"])
            return text, keep.kinds

    assert asyncio.run(main()) == ("done", frozenset({"turn/end"}))


def test_an_unexpected_use_of_a_deprecated_face_fails_the_test_run():
    """pyproject's filterwarnings turns toh_nb's own deprecation warnings into errors (outside
    ``pytest.warns``), so a test cannot start using an internal under its old public name again."""
    import asyncio

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            with pytest.raises(DeprecationWarning, match=r"^AsyncHub.runtime is internal"):
                hub.runtime
            with pytest.raises(DeprecationWarning, match=r"^AsyncHub.wait_settled is internal"):
                await hub.wait_settled("root", 0)

    asyncio.run(main())
    with pytest.raises(DeprecationWarning, match=r"^toh_nb.core.model.StopReason is renamed"):
        import toh_nb.core.model as model

        model.StopReason


def test_the_public_face_reads_no_deprecated_name():
    """Using the hubs the documented way raises no DeprecationWarning (the notebook layer included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
            kid = hub.start("work", label="w")
            kid.wait()
            job = hub.spawn("bg", background=True)
            job.output(wait=True)
            hub.agents(), hub.jobs(), hub.events(), hub.list_agents(), hub.graph(), hub.transcript(kid)
            hub.pending_permissions(), list(hub.stream(history=True, timeout=0.05)), hub.activity.line()
            assert hub.kill_job(job.id) == kill_already_finished(job.id, "completed", None)


def test_stream_and_astream_take_the_same_arguments():
    a = [(p.name, p.kind, p.default) for p in inspect.signature(tn.AsyncHub.astream).parameters.values()]
    s = [(p.name, p.kind, p.default) for p in inspect.signature(tn.Hub.stream).parameters.values()]
    assert s == a and [name for name, *_ in a][1:] == ["agent", "kinds", "history", "timeout"]


def test_spawn_overloads_tell_editors_what_comes_back():
    import typing

    for hub_cls, job_cls in [(tn.AsyncHub, tn.AsyncJob), (tn.Hub, tn.Job)]:
        hints = [typing.get_type_hints(o) for o in typing.get_overloads(hub_cls.spawn)]
        assert [(h["background"], h["return"]) for h in hints] == [
            (typing.Literal[False], tn.RunResult), (typing.Literal[True], job_cls)]
        public = typing.get_type_hints(hub_cls.__init__)
        assert "Any" not in str(public["model"]) and "Any" not in str(public["store"])
        assert typing.get_type_hints(hub_cls.call_tool)["return"] is tn.ToolResult
