"""The job tools every agent sees: ``job_output``, ``job_list``, ``job_kill``."""

from __future__ import annotations

import asyncio
from typing import Optional

import pydantic

from ..core.errors import JobError
from ..core.tools import STRICT, Tool, ToolAborted, ToolContext, ToolResult, error_text
from . import texts
from .registry import Job, JobRegistry


class JobOutputArgs(pydantic.BaseModel):
    model_config = STRICT
    job_id: str = pydantic.Field(description=texts.JOB_ID_PARAM)
    wait: Optional[bool] = pydantic.Field(None, description=texts.WAIT_PARAM)
    timeout_ms: Optional[float] = pydantic.Field(None, description=texts.TIMEOUT_PARAM)


class JobListArgs(pydantic.BaseModel):
    model_config = STRICT


class JobKillArgs(pydantic.BaseModel):
    model_config = STRICT
    job_id: str = pydantic.Field(description=texts.JOB_ID_PARAM)
    reason: Optional[str] = pydantic.Field(None, description=texts.REASON_PARAM)


def public_snapshot(job: Job) -> dict:
    out = {"id": job.id, "kind": job.kind, "label": job.label, "status": job.status,
           "started": job.started}
    if job.detail is not None:
        out["detail"] = job.detail
    if job.finished is not None:
        out["finished"] = job.finished
    return out


def make_job_tools(registry: JobRegistry, *, wait_timeout_ms: int = texts.DEFAULT_WAIT_TIMEOUT_MS,
                   max_wait_timeout_ms: int = texts.MAX_WAIT_TIMEOUT_MS) -> list[Tool]:
    if wait_timeout_ms > max_wait_timeout_ms:
        raise JobError(f"tool-jobs: waitTimeoutMs ({wait_timeout_ms}) exceeds maxWaitTimeoutMs ({max_wait_timeout_ms})")

    async def job_output(ctx: ToolContext, args: JobOutputArgs) -> dict:
        if not args.job_id:
            raise JobError(texts.invalid_job_id(args.job_id))
        if args.wait:
            timeout = args.timeout_ms if args.timeout_ms is not None else wait_timeout_ms
            if timeout > max_wait_timeout_ms:
                timeout = max_wait_timeout_ms
            try:
                await registry.wait(args.job_id, timeout, ctx.agent)
            except asyncio.CancelledError:
                raise ToolAborted(ToolResult(error_text(texts.WAIT_ABORTED), True)) from None
        elif args.timeout_ms is not None and args.timeout_ms <= 0:
            raise JobError(texts.invalid_wait_timeout(args.timeout_ms))
        text = registry.read(args.job_id, ctx.agent)
        job = registry.get(args.job_id, ctx.agent)
        return {"text": text, "job": public_snapshot(job)}

    def render_output(value: dict) -> str:
        job = value["job"]
        return texts.job_output_text(value["text"], job["status"], job.get("detail"))

    def job_list(ctx: ToolContext, args: JobListArgs) -> list[dict]:
        return [public_snapshot(j) for j in registry.list(ctx.agent)]

    def render_list(value: list[dict]) -> str:
        if not value:
            return texts.NO_JOBS
        return "\n".join(texts.job_list_line(j["id"], j["kind"], j["status"], j["label"]) for j in value)

    def job_kill(ctx: ToolContext, args: JobKillArgs) -> dict:
        if not args.job_id:
            raise JobError(texts.invalid_job_id(args.job_id))
        outcome = registry.kill(args.job_id, ctx.agent, args.reason)
        job = registry.get(args.job_id, ctx.agent)
        return {"outcome": "cancellation-requested" if outcome == "requested" else "already-finished",
                "job": public_snapshot(job)}

    def render_kill(value: dict) -> str:
        job = value["job"]
        if value["outcome"] == "cancellation-requested":
            return texts.kill_requested(job["id"])
        return texts.kill_already_finished(job["id"], job["status"], job.get("detail"))

    return [
        Tool("job_output", texts.JOB_OUTPUT_DESCRIPTION, JobOutputArgs, job_output, render=render_output,
             guidance=texts.JOBS_GUIDANCE, guidance_order=texts.JOBS_GUIDANCE_ORDER),
        Tool("job_list", texts.JOB_LIST_DESCRIPTION, JobListArgs, job_list, render=render_list),
        Tool("job_kill", texts.JOB_KILL_DESCRIPTION, JobKillArgs, job_kill, render=render_kill),
    ]
