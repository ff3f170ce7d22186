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
            users = [r["text"] for r in await hub.transcript(kid) if r["kind"] == "user/message"]
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
