"""The ``report`` tool: a continuable child sends content to its direct parent.

Installed into continuable children only (never roots or one-shot children), after the child's tool
filter, so even ``allow: []`` keeps it.
"""

from __future__ import annotations

import pydantic

from ..core.tools import STRICT, Tool, ToolContext
from . import texts
from .service import SubagentService


class ReportArgs(pydantic.BaseModel):
    model_config = STRICT
    output: str = pydantic.Field(description=texts.REPORT_OUTPUT_PARAM)


def make_report_tool(service: SubagentService) -> Tool:
    def report(ctx: ToolContext, args: ReportArgs) -> dict:
        return {"message_id": service.report_from(ctx.agent, args.output)}

    return Tool("report", texts.REPORT_DESCRIPTION, ReportArgs, report,
                render=lambda v: texts.report_accepted(v["message_id"]),
                guidance=texts.REPORT_GUIDANCE, guidance_order=texts.REPORT_GUIDANCE_ORDER)
