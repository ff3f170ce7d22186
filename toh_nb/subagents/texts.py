"""Every user-visible string of the subagent tools and service, in one place.

Result lines, refusals and notices are the reference harness's exact texts (they are an interface that
models and tests read). Tool descriptions and prompt guidance carry the same information in this
project's own words.
"""

from __future__ import annotations

DASH = "\u2014"  # U+2014, used by list_agents lines

# -- the `subagent` tool ----------------------------------------------------------------------------

DESCRIPTION_PARAM = "A short label for the delegated task (three to five words), shown in listings."
FRESH_BASE = (
    "Hand a self-contained task to a subagent: a separate agent with its own context. Use it for focused, "
    "independent work such as research, a scoped implementation or an analysis, so that the work does "
    "not fill this conversation. You get the subagent's result, not its intermediate steps. The subagent "
    "cannot see this conversation, so write a complete prompt that stands on its own.")
FRESH_PROMPT_PARAM = ("The whole task for the subagent, written to stand on its own: it does not share this "
                      "conversation, so include everything it needs to know.")
FORK_BASE = (
    "Hand a task to a subagent that starts from this conversation: a child agent seeded with every "
    "completed turn so far (not the turn in progress). Use it when the subtask builds on what was "
    "already said, such as a follow-up analysis, a review or a continuation, without spending this "
    "conversation's context on the work. You get its result, not its intermediate steps.")
FORK_PROMPT_PARAM = ("The task for the subagent. It already sees the completed turns of this conversation, so "
                     "build on them and state only what is new.")
SUFFIX_CONTINUABLE = (
    " By default it runs in the background: the call returns a durable subagent id at once and the "
    "child's conversation stays open for later turns. When a run settles you receive a notice with its "
    "outcome and its closing message; `send_message` gives the same child another turn. Pass "
    "`run_in_background: false` only when your very next step needs the result.")
SUFFIX_ONE_SHOT = (
    " The call waits for the result unless you pass `run_in_background: true`, which returns a job id "
    "instead; read the result with `job_output` and stop the job with `job_kill`.")
SUFFIX_NO_BACKGROUND = " The call waits for the subagent and returns its result."
BACKGROUND_PARAM_CONTINUABLE = ("Run in the background and get a durable subagent id at once. Defaults to true; "
                                "pass false to wait for the result when your next step depends on it.")
BACKGROUND_PARAM_ONE_SHOT = ("Run as a background job and get its id at once. Defaults to false; collect the "
                             "result with job_output or stop it with job_kill.")
CONTINUABLE_GUIDANCE = (
    "Run {tool} in the background unless you need the answer right away. Start independent delegations "
    "together in one assistant message and keep doing useful work while they run. Pass "
    "`run_in_background: false` only when your next step depends on that subagent's result. When a "
    "background run settles you receive a notice with its outcome and its closing message.")
CONTINUABLE_GUIDANCE_ORDER = 116.5

DELEGATION_STATEMENT = (
    "You are a delegated subagent. Your permissions were fixed when you were started and cannot be "
    "widened from inside this session; anything that needs approval is refused automatically. If the "
    "task needs more than that, do not retry the refused operation: say what you could not do in your "
    "reply so the agent that delegated to you can deal with it.")
DELEGATION_STATEMENT_ORDER = 120.0


def started_job(job_id: str) -> str:
    return f"started background subagent job {job_id}"


def started_child(child_id: str) -> str:
    return f"started subagent {child_id}"


HEADLINES = {
    "aborted": "subagent run was cancelled",
    "error": "subagent run failed",
    "max-tokens": "subagent run hit its token limit before finishing",
    "refusal": "subagent declined the task",
    "max-steps": "subagent run hit its step limit before finishing",
    "token-budget": "subagent run ran out of its token budget before finishing",
    "max-time": "subagent run ran out of time before finishing",
}


def headline(stop_reason: str) -> str:
    return HEADLINES.get(stop_reason, f"subagent run ended abnormally ({stop_reason})")


def failure_text(stop_reason: str, diagnostic: str | None, partial: str) -> str:
    text = headline(stop_reason)
    if diagnostic:
        text += f"\nDiagnostic: {diagnostic}"
    if partial:
        text += f"\nPartial output before the run ended:\n{partial}"
    return text


def whole_run_at(child_id: str) -> str:
    """Where the notebook user finds everything a background child did (its job handle's output of a
    run that did not complete ends with this line)."""
    return f'The child\'s whole run: hub.transcript("{child_id}")'


def run_and_dispose_failed(result_error: str, dispose_error: str) -> str:
    return f"subagent run failed: {result_error}; dispose failed: {dispose_error}"


#: a delegation cancelled before its child was published (reference §4: pre-publication abort)
ABORTED_BEFORE_PUBLICATION = "subagent request was aborted before child publication"
BACKGROUND_DISABLED = "run_in_background is disabled for this tool instance (enable_run_in_background=False)"
EMPTY_FILTER = ("tool-subagent: `toolFilter` is configured but names neither `allow` nor `deny` "
                "\u2014 remove the key or fill the filter")

# -- settlement notices and reports -----------------------------------------------------------------

SETTLED_LINES = {
    "completed": "Background subagent {id} finished and will do no further work unless you send it more.",
    "aborted": "Background subagent {id} was stopped before it finished.",
    "max-tokens": "Background subagent {id} ran out of room before it finished.",
    "refusal": "Background subagent {id} declined the task.",
    "error": "Background subagent {id} failed before it finished.",
    "max-steps": "Background subagent {id} hit its step limit before it finished.",
    "token-budget": "Background subagent {id} ran out of its token budget before it finished.",
    "max-time": "Background subagent {id} ran out of time before it finished.",
}
CLOSING_MESSAGE = "Its closing message:"
NO_CLOSING_MESSAGE = "It left no closing message."


def settled_line(child_id: str, stop_reason: str) -> str:
    template = SETTLED_LINES.get(stop_reason)
    if template is None:
        return f"Background subagent {child_id} ended abnormally ({stop_reason}) before it finished."
    return template.format(id=child_id)


def reported_line(child_id: str) -> str:
    return f"Background subagent {child_id} reported:"


# -- control tools ------------------------------------------------------------------------------------

SEND_MESSAGE_DESCRIPTION = (
    "Give a background subagent another message, by its subagent id, in the same conversation. The "
    "message becomes the subagent's next turn: if it is still busy, the message waits until the current "
    "turn ends, so it cannot change work already in progress. You get no answer from the subagent here, "
    "only confirmation that the message was queued, so use it to hand over more work. If the call "
    "fails, the message was NOT delivered.")
SUBAGENT_ID_PARAM = "The subagent id you got when the background subagent was started."
MESSAGE_PARAM = "The message to deliver to the subagent."
INTERRUPT_DESCRIPTION = (
    "Ask a background agent to stop its current turn, by agent id. The target may be your direct child "
    "or any agent started below you. Only the current turn stops: messages already queued for it stay "
    "parked until a later send_message, agents it started keep running, and the agent itself remains "
    "available for follow-ups. The call returns once the request is accepted, so the target may run on "
    "briefly; interrupting an agent that has already finished is accepted and does nothing.")
AGENT_ID_PARAM = "The agent id of the running agent to interrupt."
LIST_AGENTS_DESCRIPTION = (
    "List your continuable background subagents by durable id and label. Use it to remember which ones "
    "you started, not to poll for completion: you are told when one finishes. Status comes from the live "
    "registry: running means the agent is working now; idle means it is loaded but between turns (it "
    "may be waiting on agents it started); ready means it exists only in storage, which means resumable, "
    "not finished for good and not a result to collect, and a `send_message` starts a new turn of the "
    "same conversation. A direct child accepts `send_message` in every status. The list is a snapshot, "
    "not a delivery promise: `send_message` makes the authoritative check and may still fail. Children "
    "that could not be read appear as diagnostics rather than being dropped. Scope `descendants` walks "
    "the whole tree below you in stable pre-order and adds each entry's direct parent id and depth. Use "
    "`send_message` only on depth-1 entries; deeper entries can only be interrupted with "
    "`interrupt_agent`.")
SCOPE_PARAM = "children (the default) lists your direct children only; descendants walks the whole tree below you."
NO_SUBAGENTS = "(no subagents)"


def queued(child_id: str) -> str:
    return f"message queued as the next turn for subagent {child_id}"


def interrupt_requested(agent_id: str) -> str:
    return f"interrupt requested for agent {agent_id}"


def list_line(child_id: str, status: str, label: str) -> str:
    return f"{child_id} [{status}] {DASH} {label}"


def list_line_descendant(child_id: str, status: str, parent: str, depth: int, label: str) -> str:
    return f"{child_id} [{status}] parent={parent} depth={depth} {DASH} {label}"


def diagnostic_line(child_id: str, reason: str, parent: str | None = None, depth: int | None = None) -> str:
    if parent is None:
        return f"{child_id} [diagnostic: {reason}]"
    return f"{child_id} [diagnostic: {reason}] parent={parent} depth={depth}"


# -- report ----------------------------------------------------------------------------------------------

REPORT_DESCRIPTION = (
    "Send selected content to the agent that started you. Call it once before you finish with a "
    "self-contained final result, and earlier for progress or findings that change what that agent "
    "should do next. That agent shares your workspace but does not receive your transcript, tool output "
    "or reasoning, so finishing your work is not in itself a result. Reporting does not end your turn "
    "or your work, and only your direct parent receives it. A call that failed may still have arrived, "
    "so do not simply repeat it.")
REPORT_OUTPUT_PARAM = ("What your parent can act on: summarise your conclusions and point to the relevant "
                       "shared paths.")
REPORT_GUIDANCE = (
    "Before you finish, deliver your result with the report tool: call it once with a self-contained "
    "answer. The agent that started you shares your workspace but does not receive your transcript, "
    "tool output or reasoning, so a closing remark such as \"done\" gives it nothing to use. Report "
    "earlier too whenever a partial finding changes what that agent should do next; reporting never ends "
    "your turn.")
REPORT_GUIDANCE_ORDER = 117.0


def report_accepted(message_id: str) -> str:
    return f"report accepted by the agent that started you as message {message_id}"


# -- service errors (reference §3.9) --------------------------------------------------------------------


def duplicate_provider(name: str) -> str:
    return f'a subagent provider named "{name}" is already registered'


def no_provider(name: str) -> str:
    return f'no subagent provider registered for "{name}"'


def no_provider_named(name: str, registered: list[str]) -> str:
    """The Python caller's version of :func:`no_provider`: the names it could have used."""
    return f"{no_provider(name)}; registered providers: {', '.join(registered)}"


def not_a_provider(entry: str, value: object) -> str:
    return (f"{entry} must be a subagent provider (an object with a Capabilities `capabilities` and a "
            f"plan() or plan_now() method, such as tn.AcpAgent(...) or tn.RayProvider()), "
            f"got {type(value).__name__}")


def unsupported_capability(name: str, capability: str) -> str:
    return f'subagent provider "{name}" does not support the "{capability}" capability'


def unsupported_continuable(name: str) -> str:
    return f'subagent provider "{name}" does not support continuable children (no prepareContinuable capability)'


def provider_missing_reason(provider: str) -> str:
    return f'cannot resume: provider "{provider}" is not registered on this hub'


def provider_not_registered(child_id: str, provider: str) -> str:
    return f'subagent "{child_id}" cannot resume: its provider "{provider}" is not registered on this hub'


def duplicate_child(child_id: str) -> str:
    return f'subagent "{child_id}" already exists'


def unavailable(child_id: str) -> str:
    return f'subagent "{child_id}" is unavailable'


def unavailable_because(child_id: str, why: str) -> str:
    """:func:`unavailable`, naming why when the child's log exists but cannot be read (corrupt, unreadable)."""
    return f"{unavailable(child_id)}: {why}"


def not_resumable(child_id: str) -> str:
    return (f'subagent "{child_id}" has no supported continuation state and cannot be resumed; do not retry '
            "send_message with this id")


def needs_exact_parent(child_id: str) -> str:
    return f'subagent "{child_id}" delivery requires the exact live parent agent'


def other_parent(child_id: str) -> str:
    return f'subagent "{child_id}" belongs to another parent session'


def stale_ancestor(target: str) -> str:
    return f'interrupting "{target}" requires the exact live ancestor agent'


def self_interrupt(agent_id: str) -> str:
    return f'agent "{agent_id}" cannot interrupt itself'


def not_descendant(target: str, caller: str) -> str:
    return f'subagent "{target}" is not a live descendant of agent "{caller}"'


def cannot_report(agent_id: str) -> str:
    return f'agent "{agent_id}" is not a live continuable subagent and cannot report'


PARENT_UNAVAILABLE = "direct parent is not live; report was not delivered"


def activation_closing_message(child_id: str) -> str:
    return f'subagent "{child_id}" activation is being disposed; the message was not accepted'


def activation_closing_report(child_id: str) -> str:
    return f'subagent "{child_id}" activation is being disposed; the report was not delivered'


def parent_closing(parent_id: str) -> str:
    return f'subagent parent "{parent_id}" is being disposed; the child was not established'


DRAINING = "continuable subagents are draining; the operation was not admitted"


def unknown_tool_filter_names(names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"tool filter names unknown tool(s) {quoted}; the child was not started"

#: the diagnostic of a one-shot run whose turn was cancelled from outside the turn (not by an interrupt,
#: a kill or a limit, which end it with their own stop reasons)
TURN_CANCELLED = "the child's turn was cancelled before it ended (its task was cancelled on the hub's loop)"
