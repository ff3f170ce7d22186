"""A failure must be seen: a call a person makes whose turn ended ``error`` raises ``tn.RunError`` on both
faces (``check=False`` returns the result), other stop reasons return, and ``str()`` of a result that did
not complete says how it ended first. A child's failure stays data for its parent's model."""

from __future__ import annotations

import asyncio
import pickle

import pytest

import toh_nb as tn
from toh_nb.core.errors import cause_of
from toh_nb.providers.acp.process import AgentStartError


def broken(request):
    raise RuntimeError("no API key")


def root_fine_children_broken(request):
    if request.label is None:
        return "root ok"
    raise RuntimeError("no API key")


def test_hub_run_raises_with_the_result_and_the_cause():
    with tn.Hub(tn.FunctionModel(broken), ids="sequential") as hub:
        with pytest.raises(tn.RunError) as caught:
            hub.run("hello")
        error = caught.value
        assert str(error) == "the root's turn failed (model)\nDiagnostic: no API key"
        assert error.cause == "model" and isinstance(error, tn.TohError)
        assert (error.result.stop_reason, error.result.diagnostic, error.result.cause) == ("error", "no API key", "model")
        result = hub.run("again", check=False)
    assert result.stop_reason == "error" and result.cause == "model"
    assert str(result) == "[error: no API key]"
    assert print_of(result) == "[error: no API key]\n"


def print_of(value) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(value)
    return out.getvalue()


def test_a_foreground_child_raises_on_both_faces_and_check_false_returns_it():
    message = 'subagent "summary" (agent-1) failed (model)\nDiagnostic: no API key'
    with tn.Hub(tn.FunctionModel(root_fine_children_broken), ids="sequential") as hub:
        with pytest.raises(tn.RunError, match=r"^subagent \"summary\" \(agent-1\) failed \(model\)") as sync_error:
            hub.spawn("Summarise", label="summary")
        assert hub.spawn("Summarise", label="other", check=False).stop_reason == "error"

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(root_fine_children_broken), ids="sequential") as hub:
            with pytest.raises(tn.RunError) as caught:
                await hub.spawn("Summarise", label="summary")
            return str(caught.value), (await hub.spawn("x", label="y", check=False)).cause

    assert str(sync_error.value) == message
    assert asyncio.run(main()) == (message, "model")


def test_a_background_jobs_result_raises_its_output_stays_text():
    with tn.Hub(tn.FunctionModel(root_fine_children_broken), ids="sequential") as hub:
        job = hub.spawn("crawl", label="crawl", background=True, check=True)  # check has no effect here
        with pytest.raises(tn.RunError, match=r'^subagent "crawl" \(agent-1\) failed \(model\)\nDiagnostic: no API key$'):
            job.result(wait=True, timeout=30)
        assert job.result(check=False).stop_reason == "error"
        assert job.output().startswith("Error: subagent run failed\nDiagnostic: no API key")


def test_kid_wait_raises_only_for_the_activation_it_waited_for(tmp_path):
    with tn.Hub(tn.FunctionModel(root_fine_children_broken), ids="sequential", store=tmp_path) as hub:
        kid = hub.start("work", label="w")
        with pytest.raises(tn.RunError) as caught:
            kid.wait(timeout=30)
        assert str(caught.value) == 'subagent "w" (agent-1) failed (model)\nDiagnostic: no API key'
        assert caught.value.result.agent_id == "agent-1"
        assert kid.wait(timeout=30, check=False) is None
    # reopened: the failed activation settled in an earlier session, so a wait just returns
    with tn.Hub(tn.FunctionModel(root_fine_children_broken), ids="sequential", store=tmp_path) as hub:
        assert hub.child("agent-1").wait(timeout=5) is None


def test_a_wait_that_times_out_never_raises():
    started = asyncio.Event()

    async def slow(request):
        if request.label is None:
            return "ok"
        started.set()
        await asyncio.sleep(30)
        raise RuntimeError("late")

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(slow), ids="sequential") as hub:
            kid = await hub.start("work", label="w")
            await started.wait()
            text = await kid.wait(timeout=0.05)
            status = kid.status
            await kid.interrupt()
            return text, status

    assert asyncio.run(main()) == (None, "running")


def test_other_stop_reasons_return_and_say_so_first():
    def loop(request):
        return tn.ModelResponse(tool_calls=[tn.ToolCall("list_agents", {})])

    with tn.Hub(tn.FunctionModel(loop), ids="sequential", max_steps=2) as hub:
        result = hub.run("go")
    assert result.stop_reason == "max-steps" and result.cause is None
    assert str(result).startswith("[max-steps: ")


def test_a_childs_failure_stays_data_for_its_parent():
    def parent(request):
        if request.label is not None:
            raise RuntimeError("child broke")
        if not any(m.role == "tool" for m in request.messages):
            return tn.ModelResponse(tool_calls=[tn.ToolCall("subagent", {"description": "c", "prompt": "go"})])
        return "parent saw: " + [m for m in request.messages if m.role == "tool"][-1].text

    with tn.Hub(tn.FunctionModel(parent), ids="sequential") as hub:
        result = hub.run("delegate")
    assert result.ok and result.text == "parent saw: Error: subagent run failed\nDiagnostic: child broke"


@pytest.mark.parametrize("method,args", [("run", ("x",)), ("spawn", ("x",))])
def test_check_must_be_a_bool(method, args):
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential") as hub:
        with pytest.raises(tn.UsageError, match="^check must be"):
            getattr(hub, method)(*args, check="no")
        kid = hub.start("w", label="w")
        with pytest.raises(tn.UsageError, match="^check must be"):
            kid.wait(check=1)
        assert hub.agents()["id"].tolist() == ["root", "agent-1"]  # nothing else started


def test_causes_name_the_part_that_failed_and_survive_pickling():
    assert cause_of(RuntimeError("x")) == "model"
    assert cause_of(tn.StoreError("disk full")) == "store"
    assert cause_of(tn.ModelError("x", cause="placement")) == "placement"
    assert cause_of(AgentStartError("no binary")) == "agent process"
    again = pickle.loads(pickle.dumps(tn.ModelError("host died", cause="placement")))
    assert (type(again), str(again), again.cause) == (tn.ModelError, "host died", "placement")
    error = pickle.loads(pickle.dumps(tn.RunError("m", tn.RunResult("t", stop_reason="error"), "store")))
    assert (str(error), error.cause, error.result.text) == ("m", "store", "t")
