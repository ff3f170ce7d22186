"""The subagent system: service, providers, the delegation tool, control tools and report."""

from ..providers.local import ForkProvider, SpawnProvider
from .arguments import StartRequest
from .listing import AgentList, ListEntry
from .one_shot import SubagentResult, SubagentRun
from .service import SubagentService

__all__ = ["SubagentService", "SpawnProvider", "ForkProvider", "StartRequest", "SubagentResult", "SubagentRun",
           "ListEntry", "AgentList"]
