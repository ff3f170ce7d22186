"""The notebook's job handles (``tn.Job`` / ``AsyncJob``): a job that did not complete never reads like an
empty success. Its ``output()`` is what a foreground delegation renders for the same run and names the
transcript with the rest; ``result()`` is the child's RunResult. The model's ``job_output`` tool keeps the
reference's rule (a failed job has no output)."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.core.content import ToolCall


def rambling(request):
    """A child that writes until its token limit; the root delegates in the background once."""
    if request.depth == 0:
        if request.step == 1:
            return tn.ModelResponse(tool_calls=[ToolCall("subagent", {"description": "ramble", "prompt": "go",
                                                                      "run_in_background": True})])
        return "root done"
    return tn.ModelResponse(text="Paris is the capital of Fr", stop_reason="max_tokens", usage=tn.Usage(9, 7))


HEADLINE = "Error: subagent run hit its token limit before finishing"


def test_output_of_a_child_that_hit_max_tokens_is_the_foreground_rendering_and_the_transcript():
    with tn.Hub(model=tn.FunctionModel(rambling), ids="sequential") as hub:
        job = hub.spawn("Capital of France?", label="capital", background=True)
        text = job.output(wait=True, timeout=10)
        foreground = hub.spawn("Capital of France?", label="capital")
        assert job.status == "failed" and job.detail == "max-tokens"
        assert text == (f"{HEADLINE}\nPartial output before the run ended:\nParis is the capital of Fr\n"
                        f'The child\'s whole run: hub.transcript("{job.child_id}")')
        assert job.child_id == "agent-1"
        result = job.result()
        assert (result.stop_reason, result.text, result.agent_id, result.label, result.diagnostic) == (
            "max-tokens", "Paris is the capital of Fr", "agent-1", "capital", None)
        assert (result.usage.input_tokens, result.usage.output_tokens) == (9, 7)
        assert result.stop_reason == foreground.stop_reason and result.text == foreground.text
        transcript = hub.transcript(job.child_id, raw=True)
        assert "Paris is the capital of Fr" in list(transcript["text"])


def test_the_model_tool_keeps_the_reference_rule_and_the_root_reads_the_foreground_text():
    """What the root's model reads: job_output of a failed job has no body; the notice says failed."""
    seen = []

    def model(request):
        if request.depth == 0 and request.step == 2:
            return tn.ModelResponse(tool_calls=[ToolCall("job_output", {"job_id": "subagent-1", "wait": True})])
        if request.depth == 0 and request.step == 3:
            seen.append([m.text for m in request.messages if m.role == "tool"][-1])
            return "root done"
        return rambling(request)

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            await hub.run("delegate")
            job = await hub.job("subagent-1")
            return await job.output(), await job.result()

    output, result = asyncio.run(main())
    assert seen == ["(no new output)\n[status: failed, max-tokens]"]
    assert output.startswith(HEADLINE + "\n") and result.stop_reason == "max-tokens"


def test_a_failure_with_a_diagnostic_shows_it_and_a_running_job_has_no_result():
    release = asyncio.Event()

    async def model(request):
        if request.depth == 0:
            return rambling(request)
        await release.wait()
        raise tn.ModelError("the server went away")

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            job = await hub.spawn("go", label="doomed", background=True)
            early = (await job.output(), await job.result())
            release.set()
            return early, await job.output(wait=True, timeout=10), await job.result(check=False), job.detail

    early, text, result, detail = asyncio.run(main())
    assert early == ("", None)
    assert result.stop_reason == "error" and result.diagnostic.endswith("the server went away")
    assert detail == f"error; diagnostic: {result.diagnostic}"
    assert text == (f"Error: subagent run failed\nDiagnostic: {result.diagnostic}\n"
                    'The child\'s whole run: hub.transcript("agent-1")')


def test_a_killed_job_shows_what_its_child_wrote_before_the_kill():
    started = asyncio.Event()

    async def model(request):
        if request.depth == 0:
            return rambling(request)
        if request.step == 1:
            return tn.ModelResponse(text="halfway there", tool_calls=[ToolCall("job_list", {})])
        started.set()
        await asyncio.Event().wait()

    async def main():
        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            job = await hub.spawn("go", label="slow", background=True)
            await asyncio.wait_for(started.wait(), 10)
            assert await job.kill() == "requested"
            return await job.output(wait=True, timeout=10), await job.result(), job.status

    text, result, status = asyncio.run(main())
    assert status == "killed" and result.stop_reason == "aborted"
    assert text.startswith("Error: subagent run was cancelled")
    assert text.endswith('The child\'s whole run: hub.transcript("agent-1")')


def test_a_completed_job_reads_as_before():
    with tn.Hub(model=tn.FunctionModel(lambda r: "fine"), ids="sequential") as hub:
        job = hub.spawn("x", label="ok", background=True)
        assert job.output(wait=True, timeout=10) == "fine"
        result = job.result()
        assert (result.stop_reason, result.text, result.agent_id) == ("completed", "fine", "agent-1")
