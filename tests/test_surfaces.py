"""The sync twin mirrors the async face: same public names, same parameters, on Hub, Child and Job.

Differences are listed here on purpose (and only here): what exists because one side is async (the
stream's name, the portal), and the async face's plain rows that the notebook turns into DataFrames.
"""

from __future__ import annotations

import inspect

import toh_nb as tn

ASYNC_ONLY = {
    "AsyncHub": {"astream",  # Hub.stream
                 "event_filter", "wait_settled", "root_agent",
                 "job_registry", "store",  # engine parts the notebook layer reads
                 "agent_rows"},  # rows of some agents (on the hub's loop): what the live tree re-reads
}
SYNC_ONLY = {
    "Hub": {"stream",  # AsyncHub.astream
            "async_hub", "portal", "loop",  # the portal plumbing of the sync twin
            "tree", "graph"},  # the live widget and the Mermaid picture: notebook only
}


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


def test_sync_and_async_faces_mirror_each_other():
    for async_cls, sync_cls in [(tn.AsyncHub, tn.Hub), (tn.AsyncChild, tn.Child), (tn.AsyncJob, tn.Job)]:
        a, s = surface(async_cls), surface(sync_cls)
        assert set(a) - set(s) == ASYNC_ONLY.get(async_cls.__name__, set()), async_cls.__name__
        assert set(s) - set(a) == SYNC_ONLY.get(sync_cls.__name__, set()), sync_cls.__name__
        for name in set(a) & set(s):
            assert a[name] == s[name], f"{sync_cls.__name__}.{name} differs from {async_cls.__name__}.{name}"


def test_stream_and_astream_take_the_same_filters():
    a = [p for p in inspect.signature(tn.AsyncHub.astream).parameters if p != "self"]
    s = [p for p in inspect.signature(tn.Hub.stream).parameters if p != "self"]
    assert s[: len(a)] == a and s[len(a):] == ["timeout"]


def test_spawn_overloads_tell_editors_what_comes_back():
    import typing

    for hub_cls, job_cls in [(tn.AsyncHub, tn.AsyncJob), (tn.Hub, tn.Job)]:
        hints = [typing.get_type_hints(o) for o in typing.get_overloads(hub_cls.spawn)]
        assert [(h["background"], h["return"]) for h in hints] == [
            (typing.Literal[False], tn.RunResult), (typing.Literal[True], job_cls)]
        public = typing.get_type_hints(hub_cls.__init__)
        assert "Any" not in str(public["model"]) and "Any" not in str(public["store"])
        assert typing.get_type_hints(hub_cls.call_tool)["return"] is tn.ToolResult
