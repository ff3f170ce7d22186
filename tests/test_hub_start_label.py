"""``start(label=...)`` has one meaning in both twins: an explicit label names one continuable child of the
root, and starting it again returns that child (``reused``) without sending the prompt."""

from __future__ import annotations

import asyncio

import toh_nb as tn


def model(request):
    return f"echo: {request.messages[-1].text}"


def test_the_async_hub_returns_the_child_already_labelled_and_sends_nothing(tmp_path):
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", store=str(tmp_path)) as hub:
            kid = await hub.start("first", label="x")
            await kid.wait()
            again = await hub.start("second", label="x")
            other = await hub.start("third", label="y")
            await other.wait()
            users = [r["text"] for r in await hub.transcript(kid, raw=True) if r["kind"] == "user/message"]
            return (kid.id, kid.reused), (again.id, again.reused, again.label), (other.id, other.reused), users

    first, again, other, users = asyncio.run(main())
    assert first == ("agent-1", False) and again == ("agent-1", True, "x") and other == ("agent-2", False)
    assert users == ["first"]  # "second" was not sent

    async def resumed():  # a child stored by an earlier session is found too
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", store=str(tmp_path)) as hub:
            kid = await hub.start("fourth", label="y")
            return kid.id, kid.reused, [r["id"] for r in await hub.agents()]

    assert asyncio.run(resumed()) == ("agent-2", True, ["root", "agent-1", "agent-2"])


def test_a_child_the_root_started_through_a_tool_is_found_by_its_label():
    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential", background_mode="continuable") as hub:
            started = await hub.call_tool("subagent", description="helper", prompt="go", run_in_background=True)
            kid = await hub.start("again", label="helper")
            return started.is_error, kid.id, kid.reused

    assert asyncio.run(main()) == (False, "agent-1", True)


def test_the_sync_hub_says_it_returned_the_existing_child(capsys):
    with tn.Hub(tn.FunctionModel(model), ids="sequential") as hub:
        kid = hub.start("first", label="x")
        kid.wait()
        again = hub.start("second", label="x")
        assert (again.id, again.reused, kid.reused) == (kid.id, True, False)
    assert capsys.readouterr().out == (
        'toh_nb: the root already has a child labelled "x": agent-1 [ready]; returned it and did not send the '
        "prompt (kid.send(...) sends more; another label starts a second child)\n")


def test_labelled_starts_list_the_roots_children_once_not_once_per_start(monkeypatch):
    from toh_nb.subagents.service import SubagentService

    listings = []
    real = SubagentService.list_children
    monkeypatch.setattr(SubagentService, "list_children",
                        lambda self, parent_id: listings.append(parent_id) or real(self, parent_id))

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            kids = [await hub.start(f"work {i}", label=f"w{i}") for i in range(20)]
            again = await hub.start("more", label="w7")
            await hub.run("a root turn: its model may have started children")
            after = await hub.start("more", label="w3")
            return [k.id for k in kids][7], again.id, after.id

    assert asyncio.run(main()) == ("agent-8", "agent-8", "agent-4")
    assert listings == ["root", "root"]  # once at the first labelled start, once after the root's turn
