"""The span and attribute names a trace of a hub uses, in one place.

Why strings here and not the ``opentelemetry-semantic-conventions`` constants: the GenAI names live in
that package's ``_incubating`` module (a private path that moves between releases), and this module
must be importable without OpenTelemetry (``tracing=`` is off by default and then nothing of it is
imported). ``tests/tracing/test_names.py`` checks every ``gen_ai.*``, ``server.*`` and ``error.*``
name below against the installed conventions, so a rename there fails a test here.

Names of the OpenTelemetry GenAI semantic conventions (agent spans, inference spans, tool spans):
https://opentelemetry.io/docs/specs/semconv/gen-ai/ . Facts the conventions have no name for (an
agent's delegation depth, its stop reason, a cost) use the ``toh_nb.`` namespace.
"""

from __future__ import annotations

# -- operation names (gen_ai.operation.name; also the first word of each span's name) --------------
INVOKE_AGENT = "invoke_agent"
CHAT = "chat"
EXECUTE_TOOL = "execute_tool"

# -- GenAI semantic conventions ----------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # content: opt-in only
TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # content: opt-in only
INPUT_MESSAGES = "gen_ai.input.messages"  # content: opt-in only
OUTPUT_MESSAGES = "gen_ai.output.messages"  # content: opt-in only
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

#: every convention name used above (the test compares them with the installed conventions)
CONVENTION_NAMES = (OPERATION_NAME, PROVIDER_NAME, AGENT_ID, AGENT_NAME, CONVERSATION_ID, REQUEST_MODEL,
                    REQUEST_MAX_TOKENS, RESPONSE_FINISH_REASONS, USAGE_INPUT_TOKENS, USAGE_OUTPUT_TOKENS,
                    TOOL_NAME, TOOL_CALL_ID, TOOL_TYPE, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT, INPUT_MESSAGES,
                    OUTPUT_MESSAGES, SERVER_ADDRESS, SERVER_PORT, ERROR_TYPE)
#: values of gen_ai.operation.name used (checked against the conventions' enumeration)
OPERATIONS = (INVOKE_AGENT, CHAT, EXECUTE_TOOL)

# -- toh_nb's own ------------------------------------------------------------------------------------
AGENT_MODE = "toh_nb.agent.mode"  # root | one-shot | continuable
AGENT_DEPTH = "toh_nb.agent.depth"
AGENT_PARENT = "toh_nb.agent.parent_id"
AGENT_LABEL = "toh_nb.agent.label"
BACKGROUND = "toh_nb.agent.background"  # a job's child or a continuable child: its turns start traces
SUBAGENT_PROVIDER = "toh_nb.subagent.provider"  # spawn | fork | a registered provider's name
TURN = "toh_nb.turn"
STEP = "toh_nb.step"
STOP_REASON = "toh_nb.stop_reason"
DIAGNOSTIC = "toh_nb.diagnostic"
COST = "toh_nb.usage.cost"  # with prices=: the price table's currency
SUBTREE_TOKENS = "toh_nb.usage.subtree_tokens"
MAX_STEPS = "toh_nb.budget.max_steps"
TOKEN_BUDGET = "toh_nb.budget.token_budget"
TURN_TIMEOUT = "toh_nb.budget.turn_timeout"
LINK_KIND = "toh_nb.link"  # on span links: started_by | woken_by
STARTED_BY = "started_by"
WOKEN_BY = "woken_by"

# span events (on the spans they touch)
EVENT_MESSAGE = "toh_nb.message"  # a message queued for this agent (send_message, a notice, a report)
EVENT_MESSAGE_SENT = "toh_nb.message.sent"  # on the sender's span
EVENT_INTERRUPT = "toh_nb.interrupt"  # this agent's turn was interrupted
EVENT_INTERRUPT_SENT = "toh_nb.interrupt.sent"  # on the interrupter's span
EVENT_CHILD_STARTED = "toh_nb.subagent.started"
EVENT_CHILD_ENDED = "toh_nb.subagent.ended"
EVENT_JOB_STARTED = "toh_nb.job.started"
EVENT_JOB_STOPPING = "toh_nb.job.stopping"
EVENT_JOB_ENDED = "toh_nb.job.ended"
EVENT_TOOL_ABANDONED = "toh_nb.tool.abandoned"
EVENT_EXTERNAL = "toh_nb.external"  # an external (ACP) agent's reported activity
# event attributes
MESSAGE_SOURCE = "toh_nb.message.source"
MESSAGE_ID = "toh_nb.message.id"
MESSAGE_TEXT = "toh_nb.message.text"  # content: opt-in only
TARGET = "toh_nb.target_id"
SENDER = "toh_nb.sender_id"
CHILD_ID = "toh_nb.child_id"
JOB_ID = "toh_nb.job.id"
JOB_STATUS = "toh_nb.job.status"
ACTIVITY = "toh_nb.activity"

# OpenInference's input/output panels (Phoenix shows them; content: opt-in only)
INPUT_VALUE = "input.value"
OUTPUT_VALUE = "output.value"

#: turn stop reasons a span reports as an error (its status ERROR, ``error.type`` the reason)
ERROR_STOPS = frozenset({"error", "max-tokens", "blocked", "max-steps", "token-budget", "max-time"})
#: the longest diagnostic or content string put on a span (longer ones end with an ellipsis)
MAX_TEXT = 4000
