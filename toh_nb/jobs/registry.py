"""The background job registry: ids, states, the owner fence, wait/kill and completion notices.

A job runs one coroutine as an asyncio task. Its status goes ``running`` → (``stopping`` after a kill
request) → exactly one of ``completed | killed | failed``. Ids are ``<kind>-<N>`` with a per-kind
counter (``subagent-1, subagent-2, …``), predictable on purpose: the owner fence, not secrecy, protects
them. Each owner may have at most ``max_per_owner`` active jobs.

When a job settles, its owner gets a notice (``background job subagent-1 (subagent: label) finished
[status: completed]. Read its output with job_output.``): it wakes an idle owner while the owner's wake
budget lasts (``max_consecutive_wakes``, refilled when the owner takes a ``user`` message), otherwise it
is injected for the owner's next step. A job that was killed gets no notice; a job started by the
notebook user (not by a model) never wakes the root agent, its notice waits for the next turn.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ..core.checks import is_int_at_least
from ..core.content import Message, Source, Text, bound
from ..core.errors import JobError, describe
from ..core.events import JobEnded, JobStarted, JobStopping
from ..core.runtime import RuntimeObserver
from ..core.states import JobStatus
from . import texts

TERMINAL = (JobStatus.COMPLETED, JobStatus.KILLED, JobStatus.FAILED)


@dataclass(slots=True)
class JobOutcome:
    status: str  # completed | killed | failed
    detail: str | None = None
    output: str = ""
    #: the producer's own record of how the work ended (a subagent job: the child's ``SubagentResult``,
    #: with its stop reason, diagnostic and partial text). Never read by the ``job_output`` tool, which
    #: keeps the reference's rule that a failed job has no output; the notebook's job handle shows it.
    result: Any = None


class Job:
    """One background job (a snapshot of it is what tools and tables show)."""

    __slots__ = ("id", "kind", "label", "owner", "status", "detail", "output", "result", "started", "finished",
                 "reported", "task", "by_user", "kill_reason", "child_id", "cleanup", "registry", "_waiters")

    def __init__(self, id: str, kind: str, label: str, owner: Any, by_user: bool, registry: Any = None) -> None:
        self.id = id
        self.kind = kind
        self.label = label
        self.owner = owner
        self.status = "running"
        self.detail: str | None = None
        self.output = ""
        #: how the work ended, in the producer's terms (:attr:`JobOutcome.result`), once settled
        self.result: Any = None
        self.started = time.time()
        self.finished: float | None = None
        self.reported = False
        self.task: asyncio.Task | None = None
        self.by_user = by_user
        self.kill_reason: str | None = None
        self.child_id: str | None = None
        #: async release of what the job's synchronous start created, for a kill before its task runs
        self.cleanup: Callable[[], Awaitable[Any]] | None = None
        #: the :class:`JobRegistry` that started it: reads, kills and the owner fence go through it
        self.registry: JobRegistry | None = registry
        self._waiters: list[asyncio.Future] = []

    @property
    def owner_id(self) -> str | None:
        return self.owner.id if self.owner is not None else None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    @property
    def elapsed(self) -> float:
        return (self.finished or time.time()) - self.started

    def status_line(self) -> str:
        return texts.status_line(self.status, self.detail)

    async def settled(self, timeout: float) -> None:
        """Wait until the registry settles this job or ``timeout`` seconds pass (a timeout is no error)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def wake_waiters(self) -> None:
        """Release every :meth:`settled` wait (the registry calls it once, when the job settles)."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def __repr__(self) -> str:
        return f"Job({self.id} [{self.kind}] {self.status} \u2014 {self.label})"


class JobRegistry(RuntimeObserver):
    def __init__(self, runtime: Any, *, max_per_owner: int = texts.DEFAULT_MAX_JOBS_PER_OWNER,
                 max_consecutive_wakes: int = texts.DEFAULT_MAX_CONSECUTIVE_WAKES,
                 completion_delivery: str = "wakeup") -> None:
        if completion_delivery not in ("wakeup", "quiet"):
            raise JobError(f'completion_delivery must be "wakeup" or "quiet", got {completion_delivery!r}')
        if not is_int_at_least(max_consecutive_wakes, 1):
            raise JobError(f"max_consecutive_wakes must be a positive integer, got {max_consecutive_wakes!r}")
        self.runtime = runtime
        self.max_per_owner = max_per_owner
        self.max_consecutive_wakes = max_consecutive_wakes
        self.completion_delivery = completion_delivery
        self.jobs: dict[str, Job] = {}
        self._counters: dict[str, int] = {}
        self._active: dict[Any, set[Job]] = {}  # owner object (or None) -> its running+stopping jobs
        self._spent_wakes: dict[str, int] = {}
        self.closed = False
        self._cleanups: set[asyncio.Task] = set()
        runtime.observers.append(self)

    # -- start ---------------------------------------------------------------------------------

    def start(self, kind: str, label: str, owner: Any, run: Callable[[Job], Awaitable[JobOutcome]], *,
              by_user: bool = False) -> Job:
        """Preflight, call ``run(job)`` (its synchronous part runs now) and await what it returns as a
        task; returns the job at once."""
        if self.closed:
            raise JobError("background jobs unavailable: the job registry is closed")
        if not isinstance(kind, str) or not kind:
            raise JobError("invalid job kind: expected a non-empty string")
        if not isinstance(label, str) or not label:
            raise JobError(texts.invalid_label(label))
        if owner is not None and not self.runtime.is_live(owner):
            raise JobError(texts.owner_not_live(owner.id))
        if len(self._active.get(owner, ())) >= self.max_per_owner:
            raise JobError(texts.job_limit(self.max_per_owner))
        number = self._counters.get(kind, 0) + 1
        job = Job(f"{kind}-{number}", kind, label, owner, by_user, self)
        work = run(job)  # the synchronous part runs now (a throw registers nothing)
        self._counters[kind] = number
        self.jobs[job.id] = job
        self._active.setdefault(owner, set()).add(job)
        job.task = asyncio.get_running_loop().create_task(self._supervise(job, work))
        job.task.add_done_callback(lambda task: self._never_started(task, job, work))
        self.runtime.bus.publish(JobStarted(agent_id=job.owner_id, job=job.id, job_kind=kind, label=label))
        return job

    async def _supervise(self, job: Job, work: Awaitable[JobOutcome]) -> None:
        try:
            outcome = await work
            if not isinstance(outcome, JobOutcome):
                outcome = JobOutcome("failed", f"job returned {type(outcome).__name__}, not a JobOutcome")
        except asyncio.CancelledError:
            outcome = JobOutcome("killed")
        except Exception as error:  # a crashing job fails; it never takes the registry down
            outcome = JobOutcome("failed", describe(error))
        self._settle(job, outcome)

    def _never_started(self, task: asyncio.Task, job: Job, work: Awaitable[JobOutcome]) -> None:
        """A kill can land before the task first runs: _supervise never starts, so settle it here."""
        if task.cancelled():
            close = getattr(work, "close", None)
            if close is not None:
                close()
            if job.cleanup is not None:
                self._cleanups.add(asyncio.get_running_loop().create_task(job.cleanup()))
            self._settle(job, JobOutcome("killed"))

    def _settle(self, job: Job, outcome: JobOutcome) -> None:
        if job.done:
            return
        job.status = outcome.status if outcome.status in TERMINAL else "failed"
        job.detail = outcome.detail
        job.output = outcome.output or ""
        job.result = outcome.result
        job.finished = time.time()
        active = self._active.get(job.owner)
        if active is not None:
            active.discard(job)
            if not active:
                del self._active[job.owner]
        job.wake_waiters()
        self.runtime.bus.publish(JobEnded(agent_id=job.owner_id, job=job.id, job_kind=job.kind, label=job.label,
                                          status=job.status, detail=job.detail, child_id=job.child_id))
        self._notify(job)

    def _notify(self, job: Job) -> None:
        # A wait does not suppress the notice (the reference harness delivers it after a waited read);
        # a kill or a terminal read before settlement does.
        owner = job.owner
        if job.reported or owner is None or self.closed or not self.runtime.is_live(owner) or owner.disposed:
            return
        text = texts.completion_notice(job.id, job.kind, job.label, job.status, job.detail)
        summary = bound(f"{job.kind} {job.label} {job.status_line()}")
        message = Message("user", [Text(text)], id=self.runtime.ids.message(),
                          source=Source("plugin", form="notice", plugin="tool-jobs", summary=summary))
        spent = self._spent_wakes.get(owner.id, 0)
        if (self.completion_delivery == "wakeup" and not job.by_user and owner.status == "idle"
                and spent < self.max_consecutive_wakes):
            self._spent_wakes[owner.id] = spent + 1
            owner.followup(message)
        else:
            owner.inject(message)

    # -- access --------------------------------------------------------------------------------

    def get(self, job_id: str, caller: Any) -> Job:
        if not isinstance(job_id, str) or not job_id:
            raise JobError(texts.invalid_job_id(job_id))
        job = self.jobs.get(job_id)
        if job is None:
            raise JobError(texts.unknown_job(job_id))
        if job.owner is not None and (caller is None or job.owner.id != caller.id):
            raise JobError(texts.foreign_job(job_id))
        return job

    def list(self, caller: Any) -> list[Job]:
        caller_id = caller.id if caller is not None else None
        return [j for j in self.jobs.values() if j.owner is None or j.owner.id == caller_id]

    def read(self, job_id: str, caller: Any) -> str:
        job = self.get(job_id, caller)
        if not job.done:
            return ""
        job.reported = True
        return job.output

    def kill(self, job_id: str, caller: Any, reason: str | None = None) -> str:
        job = self.get(job_id, caller)
        if job.done:
            job.reported = True
            return "already-finished"
        if job.status == "running":
            job.kill_reason = reason or "background subagent task killed"
            job.status = "stopping"
            job.reported = True
            if job.task is not None:
                job.task.cancel(job.kill_reason)
            self.runtime.bus.publish(JobStopping(agent_id=job.owner_id, job=job.id, reason=job.kill_reason))
        return "requested"

    async def wait(self, job_id: str, timeout_ms: float, caller: Any) -> Job:
        """Wait for settlement; a timeout returns the live job (not an error)."""
        if (isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float))
                or not 0 < timeout_ms <= texts.MAX_WAIT_TIMEOUT_MS):
            raise JobError(texts.invalid_wait_timeout(timeout_ms))
        job = self.get(job_id, caller)
        if job.done:
            return job
        await job.settled(timeout_ms / 1000.0)
        return job

    # -- lifecycle -----------------------------------------------------------------------------

    def on_claimed(self, agent: Any, message: Message) -> None:
        if message.source is not None and message.source.kind == "user" and agent.id in self._spent_wakes:
            del self._spent_wakes[agent.id]

    def on_unregistered(self, agent: Any) -> None:
        """Owner disposal: its running jobs are cancelled without a notice into the dying owner."""
        for job in list(self._active.get(agent, ())):
            if not job.done:
                job.reported = True
                job.kill_reason = "owner disposed"
                if job.task is not None:
                    job.task.cancel("owner disposed")

    async def close(self) -> None:
        self.closed = True
        tasks = []
        for job in self.jobs.values():
            if not job.done and job.task is not None:
                job.reported = True
                job.kill_reason = "jobs service disposed"
                job.task.cancel("jobs service disposed")
                tasks.append(job.task)
        tasks.extend(self._cleanups)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
