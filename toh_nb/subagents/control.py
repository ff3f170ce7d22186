"""The control tools every agent sees: ``send_message``, ``interrupt_agent``, ``list_agents``.

Thin adapters over the service: authorization and routing live there, the exact result lines here.
"""

from __future__ import annotations

from typing import Literal, Optional

import pydantic

from ..core.content import USER_SOURCE, relay_source
from ..core.tools import STRICT, Tool, ToolContext
from . import texts
from .listing import AgentList
from .service import SubagentService
from .tool import ToolFailure


class SendMessageArgs(pydantic.BaseModel):
    model_config = STRICT
    subagent_id: str = pydantic.Field(description=texts.SUBAGENT_ID_PARAM)
    message: str = pydantic.Field(description=texts.MESSAGE_PARAM)


class InterruptArgs(pydantic.BaseModel):
    model_config = STRICT
    agent_id: str = pydantic.Field(description=texts.AGENT_ID_PARAM)


class ListAgentsArgs(pydantic.BaseModel):
    model_config = STRICT
    scope: Optional[Literal["children", "descendants"]] = pydantic.Field(None, description=texts.SCOPE_PARAM)


def _require_id(value: str, field: str) -> None:
    if not value.strip():
        raise ToolFailure(f"{field} must be a non-empty id")


def make_control_tools(service: SubagentService) -> list[Tool]:
    async def send_message(ctx: ToolContext, args: SendMessageArgs) -> dict:
        _require_id(args.subagent_id, "subagent_id")
        if not args.message.strip():
            raise ToolFailure("message must be a non-empty string")
        source = USER_SOURCE if ctx.by_user else relay_source("coordinator", ctx.agent.id)
        message_id = await service.followup(ctx.agent, args.subagent_id, args.message, source)
        return {"message_id": message_id, "subagent_id": args.subagent_id}

    def interrupt_agent(ctx: ToolContext, args: InterruptArgs) -> dict:
        _require_id(args.agent_id, "agent_id")
        service.interrupt(args.agent_id, ctx.agent)
        return {"accepted": True, "agent_id": args.agent_id}

    def list_agents(ctx: ToolContext, args: ListAgentsArgs) -> AgentList:
        if args.scope == "descendants":
            return service.list_descendants(ctx.agent.id)
        return service.list_children(ctx.agent.id)

    return [
        Tool("send_message", texts.SEND_MESSAGE_DESCRIPTION, SendMessageArgs, send_message,
             render=lambda v: texts.queued(v["subagent_id"])),
        Tool("interrupt_agent", texts.INTERRUPT_DESCRIPTION, InterruptArgs, interrupt_agent,
             render=lambda v: texts.interrupt_requested(v["agent_id"])),
        Tool("list_agents", texts.LIST_AGENTS_DESCRIPTION, ListAgentsArgs, list_agents, render=str),
    ]
