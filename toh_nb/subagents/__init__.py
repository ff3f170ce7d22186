"""The subagent system: service, providers, the delegation tool, control tools and report."""

from .providers import ForkProvider, SpawnProvider
from .service import AgentList, ListEntry, StartRequest, SubagentResult, SubagentRun, SubagentService

__all__ = ["SubagentService", "SpawnProvider", "ForkProvider", "StartRequest", "SubagentResult", "SubagentRun",
           "ListEntry", "AgentList"]
