"""Background jobs: the registry (ids, states, owner fence, wait/kill, notices) and the job tools."""

from .registry import Job, JobOutcome, JobRegistry
from .tools import make_job_tools

__all__ = ["Job", "JobOutcome", "JobRegistry", "make_job_tools"]
