"""Every user-visible string of the job tools, in one place (they are an interface: tests pin them)."""

from __future__ import annotations

import json

MAX_WAIT_TIMEOUT_MS = 600_000
DEFAULT_WAIT_TIMEOUT_MS = 30_000
DEFAULT_MAX_JOBS_PER_OWNER = 10
DEFAULT_MAX_CONSECUTIVE_WAKES = 3

JOB_OUTPUT_DESCRIPTION = (
    "Read what a background job produced. A job that delivers one final result returns it once it has "
    "settled; until then the body says there is no new output. Every answer ends with a `[status: ...]` "
    "line. The call does not block unless you pass `wait: true`, which waits for the job to settle for "
    "at most the configured limit and then reports whatever state it is in.")
JOB_ID_PARAM = "The job id that was returned when the background work started."
WAIT_PARAM = ("Wait until the job settles or the timeout passes. A wait that times out reports "
              "[status: running] and leaves the job running.")
TIMEOUT_PARAM = ("Longest wait in milliseconds, used only with wait: true. Defaults to the configured "
                 "wait timeout and never exceeds the configured maximum.")
JOB_LIST_DESCRIPTION = "Show your background jobs, running and finished, with their ids, kinds and statuses."
JOB_KILL_DESCRIPTION = ("Ask a running background job to stop, by job id. The call returns at once; the job "
                        "is marked killed when its work has actually stopped.")
REASON_PARAM = "Optional short reason, kept in the log and passed to the job."
JOBS_GUIDANCE = (
    "Keep track of the id of every background job you start. You will be told in this conversation when "
    "a job finishes, so do not poll it or wait idly; carry on with steps that do not depend on it and do "
    "not repeat work a running job is already doing. Before your final answer, collect each job whose "
    "result still matters with job_output (use wait: true only when you truly cannot proceed without "
    "it), and stop with job_kill any job you no longer need.")
JOBS_GUIDANCE_ORDER = 106.0

NO_NEW_OUTPUT = "(no new output)"
NO_JOBS = "(no background jobs)"


def status_line(status: str, detail: str | None = None) -> str:
    return f"[status: {status}, {detail}]" if detail else f"[status: {status}]"


def job_output_text(body: str, status: str, detail: str | None) -> str:
    body = body or NO_NEW_OUTPUT
    sep = "" if body.endswith("\n") else "\n"
    return f"{body}{sep}{status_line(status, detail)}"


def job_list_line(job_id: str, kind: str, status: str, label: str) -> str:
    return f"{job_id} [{kind}] {status} \u2014 {label}"


def kill_requested(job_id: str) -> str:
    return f"requested cancellation of job {job_id}"


def kill_already_finished(job_id: str, status: str, detail: str | None) -> str:
    return f"job {job_id} had already finished {status_line(status, detail)}"


def completion_notice(job_id: str, kind: str, label: str, status: str, detail: str | None) -> str:
    return (f"background job {job_id} ({kind}: {label}) finished {status_line(status, detail)}. "
            "Read its output with job_output.")


def unknown_job(job_id: str) -> str:
    return f"unknown job {job_id}"


def foreign_job(job_id: str) -> str:
    return f"job {job_id} belongs to another session"


def job_limit(limit: int) -> str:
    return (f"background job limit reached for this owner (limit: {limit}); use job_kill to stop an "
            "unneeded job, wait for it to finish, then retry")


def invalid_job_id(value: object) -> str:
    return f"invalid job_id: expected a non-empty string, got {json.dumps(value)}"


def invalid_wait_timeout(value: object, maximum: int = MAX_WAIT_TIMEOUT_MS) -> str:
    return (f"invalid wait timeout: expected a positive number of milliseconds no greater than {maximum}, "
            f"got {json.dumps(value)}")


def invalid_label(value: object) -> str:
    return "invalid job label: expected a non-empty string"


def owner_not_live(agent_id: str) -> str:
    return f'agent "{agent_id}" is not the registered agent instance (background job owner must be live)'


#: ``job_output`` with ``wait`` whose caller's turn was cancelled while it waited (reference §8)
WAIT_ABORTED = "wait aborted"
