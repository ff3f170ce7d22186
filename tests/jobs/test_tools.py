"""The job tools through the root agent: exact texts and bad input."""

from __future__ import annotations

import asyncio

import toh_nb as tn
from toh_nb.testing import engine_of


def test_job_tools_texts_and_bad_input_keep_the_table_consistent():
    async def main():
        release = asyncio.Event()

        async def model(req):
            if req.label:
                await release.wait()
                return "background answer"
            return "root"

        async with tn.AsyncHub(tn.FunctionModel(model), ids="sequential") as hub:
            call = hub.call_tool
            assert (await call("job_list")).text == "(no background jobs)"
            assert (await call("subagent", description="bg", prompt="p", run_in_background=True)).text == \
                "started background subagent job subagent-1"
            assert (await call("job_output", job_id="subagent-1")).text == "(no new output)\n[status: running]"
            timed_out = await call("job_output", job_id="subagent-1", wait=True, timeout_ms=10)
            assert timed_out.text == "(no new output)\n[status: running]" and not timed_out.is_error
            release.set()
            assert (await call("job_output", job_id="subagent-1", wait=True)).text == "background answer\n[status: completed]"
            assert (await call("job_output", job_id="subagent-1")).text == "background answer\n[status: completed]"
            assert (await call("job_list")).text == "subagent-1 [subagent] completed \u2014 bg"
            assert (await call("job_kill", job_id="subagent-1")).text == \
                "job subagent-1 had already finished [status: completed]"
            bad = {
                "missing id": await call("job_output"),
                "empty id": await call("job_output", job_id=""),
                "mistyped wait": await call("job_output", job_id="subagent-1", wait="yes"),
                "extra": await call("job_list", verbose=True),
                "unknown": await call("job_kill", job_id="subagent-9"),
                "negative timeout": await call("job_output", job_id="subagent-1", wait=True, timeout_ms=-1),
                "bad description": await call("subagent", description=7, prompt="p"),
                "bad background": await call("subagent", description="d", prompt="p", run_in_background="true"),
                "extra subagent": await call("subagent", description="d", prompt="p", model="gpt"),
            }
            assert all(r.is_error for r in bad.values()), bad
            assert "job_id: Field required" in bad["missing id"].text
            assert bad["empty id"].text == 'Error: invalid job_id: expected a non-empty string, got ""'
            assert "wait: Input should be a valid boolean" in bad["mistyped wait"].text
            assert "verbose: unexpected argument" in bad["extra"].text
            assert bad["unknown"].text == "Error: unknown job subagent-9"
            assert bad["negative timeout"].text.startswith("Error: invalid wait timeout: expected a positive number")
            assert "description: Input should be a valid string" in bad["bad description"].text
            assert "run_in_background: Input should be a valid boolean" in bad["bad background"].text
            assert "model: unexpected argument" in bad["extra subagent"].text
            assert list(engine_of(hub).jobs.jobs) == ["subagent-1"]  # nothing half-started
            assert len(engine_of(hub).runtime.agents) == 1

    asyncio.run(main())
