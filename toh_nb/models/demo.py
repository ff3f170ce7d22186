"""DemoModel: the offline default model — a deterministic planner/worker that really delegates.

No network, no key, no randomness between runs: every decision is a function of the request (the
conversation, the tools offered, the agent's label and depth) and of ``seed``, so a hub with
``ids="sequential"`` produces the same transcripts run after run.

The root agent (label ``None``), given a user prompt about some topic:

1. fans out three foreground one-shot delegations in one assistant message — ``research``,
   ``analyse`` and ``draft`` — which the engine runs in parallel;
2. starts a fourth, ``review``, in the background (``run_in_background: true``);
3. adapts to what that returned: a background *job* (``started background subagent job …``, the
   default one-shot tool) is collected with ``job_output`` (``wait: true``); a *continuable* child
   (``started subagent …``, a hub with ``background_mode="continuable"``) gets a follow-up with
   ``send_message`` and reports back later through its settlement notice;
4. answers with a summary of what every child said.

Children (label not ``None``) answer their prompt with a short text for their role; the ``research``
child at depth 1 first delegates once more (``sources``), so the tree has a grandchild. A child that
receives a follow-up answers it. Notices (settlement notices, job completion notices, reports) are
acknowledged with a short text. Unknown labels and arbitrary prompts get a generic, deterministic
answer. Every turn is bounded (at most a few steps) and always ends with a final text. Tools missing
from the request (a tool filter, ``max_depth=0``) or failing calls are handled: the answer says so.

Each model call sleeps ``latency`` seconds scaled by a deterministic factor in [0.5, 1.5) (4x that for
the reviewer's first turn, so a follow-up the root sends it right away normally joins the same
activation), cancellably, and reports word-count based token usage (input: the words of the system
prompt and the conversation; output: the words it writes). With the default one-shot ``subagent`` tool
every run of the same prompt gives the same transcripts; in ``background_mode="continuable"`` the
moment the reviewer's notice reaches the root depends on timing.
"""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

from ..core.content import Message, ToolCall, Usage
from ..core.checks import check_number
from ..core.errors import UsageError
from ..core.model import ModelRequest, ModelResponse, ToolSpec

INSTRUCTION_SOURCES = ("user", "coordinator")
FANOUT = ("research", "analyse", "draft")
MAX_CHILD_STEPS = 2

PROMPTS = {
    "research": 'Research "{topic}": list the key facts and the open questions.',
    "analyse": 'Analyse "{topic}": weigh the main options and their trade-offs.',
    "draft": 'Draft a short outline of an answer about "{topic}".',
    "review": 'Review the plan for "{topic}": point out gaps and risks.',
    "sources": 'Find sources on "{topic}".',
}
FOLLOW_UP = 'Follow-up: which single risk matters most for "{topic}"?'

ANSWERS = {
    "research": [
        "Key facts on {s}: it has a clear definition, a short history and two open questions worth checking.",
        "Key facts on {s}: three established results, one disputed claim and a gap in recent data.",
        "Key facts on {s}: the basics are well documented; the open question is how it scales.",
    ],
    "analyse": [
        "Analysis of {s}: the main trade-off is depth versus speed; start small and measure.",
        "Analysis of {s}: two viable options; the cheaper one wins unless quality is critical.",
        "Analysis of {s}: the risk is concentrated in one step, so check that step first.",
    ],
    "draft": [
        "Draft outline for {s}: 1) context, 2) findings, 3) recommendation.",
        "Draft outline for {s}: 1) the question, 2) the evidence, 3) what to do next.",
        "Draft outline for {s}: 1) summary, 2) options, 3) decision and follow-ups.",
    ],
    "review": [
        "Review of {s}: the plan is consistent; the one gap is evidence for the recommendation.",
        "Review of {s}: sound overall; add a fallback in case the first option fails.",
        "Review of {s}: clear and complete; the timeline is the weakest part.",
    ],
    "editor": [
        "Edited {s}: tightened the wording and moved the recommendation to the top.",
        "Edited {s}: shorter sentences, one idea per paragraph, the key number in the title.",
        "Edited {s}: cut the repetition and ended with a clear next step.",
    ],
    "sources": [
        "Sources on {s}: an overview article, a survey paper and one primary dataset.",
        "Sources on {s}: two textbooks and a recent review article.",
        "Sources on {s}: the official documentation and a well-cited survey.",
    ],
}
FOLLOW_UP_ANSWERS = [
    "On the follow-up about {s}: the biggest risk is acting on incomplete data; verify it first.",
    "On the follow-up about {s}: the biggest risk is scope creep; fix the scope up front.",
    "On the follow-up about {s}: the biggest risk is a single point of failure; plan a fallback.",
]


def _words(text: str) -> int:
    return len(text.split())


def _is_instruction(message: Message) -> bool:
    return message.role == "user" and (message.source is None or message.source.kind in INSTRUCTION_SOURCES)


def _is_notice(message: Message) -> bool:
    return message.role == "user" and not _is_instruction(message)


def _topic(text: str, limit: int = 60) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    topic = (lines[0] if lines else "the task").replace('"', "'")
    topic = topic.rstrip(".!?;: ")
    if len(topic) > limit:
        topic = topic[:limit].rsplit(" ", 1)[0] + "\u2026"
    return topic or "the task"


def _subject(prompt: str) -> str:
    match = re.search(r'"([^"]+)"', prompt)
    return match.group(1) if match else _topic(prompt)


def _quoted(subject: str) -> str:
    """``"the subject"`` with a sentence-initial capital lowered (``"Plan a trip"`` -> ``"plan a trip"``)."""
    if len(subject) > 1 and subject[0].isupper() and not subject[1].isupper() and not subject.startswith("I "):
        subject = subject[0].lower() + subject[1:]
    return f'"{subject}"'


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _role(label: str | None) -> str | None:
    if not label:
        return None
    head = label.split(":", 1)[0].strip().lower()
    return head if head in ANSWERS else None


class DemoModel:
    """The offline default model: a deterministic planner/worker that really delegates.

    ``tn.Hub()`` uses it when no model is given. The root fans out three parallel foreground children
    (``research``, ``analyse``, ``draft``; ``research`` delegates once more), starts a ``review`` child in the
    background, collects it, and answers with a summary; children answer with a short text for their
    role. No network, no key, no randomness between runs; token usage is counted in words. Its name in
    ``prices=`` is ``"demo"``.

    Args:
        latency: seconds each model call sleeps, scaled by a deterministic factor in [0.5, 1.5).
        seed: varies the wording of answers deterministically (an integer or a string).

    Raises:
        UsageError: ``latency`` is negative, NaN or not a number, or ``seed`` is neither an integer nor a
            string.
    """

    def __init__(self, latency: float = 0.02, seed: int = 0) -> None:
        check_number(latency, "latency", none=None)
        if isinstance(seed, bool) or not isinstance(seed, (int, str)):
            raise UsageError(f"seed must be an integer or a string, got {seed!r}")
        self.latency = float(latency)
        self.seed = seed
        self.name = "demo"

    def __repr__(self) -> str:
        return f"DemoModel(latency={self.latency}, seed={self.seed!r})"

    # -- the protocol ---------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        response = self.decide(request)
        delay = self.delay(request)
        if delay > 0:
            await asyncio.sleep(delay)
        return response

    def delay(self, request: ModelRequest) -> float:
        if not self.latency:
            return 0.0
        rng = random.Random(f"{self.seed}|delay|{request.path}|{request.turn}|{request.step}")
        factor = 0.5 + rng.random()
        if _role(request.label) == "review" and request.turn == 1:
            # the background reviewer works longer than the root's next step, so a follow-up the
            # root sends it right away normally joins the same activation (one settlement notice)
            factor *= 4
        return self.latency * factor

    def decide(self, request: ModelRequest) -> ModelResponse:
        """The response for ``request`` (pure: no sleeping, no state)."""
        messages = request.messages
        if not messages:
            return self._final(request, "There is nothing to do yet: send me a task.")
        if _is_notice(messages[-1]):
            position = len(messages) - 1
            while position >= 0 and _is_notice(messages[position]):
                position -= 1
            before = messages[position] if position >= 0 else None
            if before is None or (before.role == "assistant" and not before.tool_calls):
                return self._acknowledge(request, messages[position + 1:])
        if request.label is None:
            return self._root(request)
        return self._child(request)

    # -- helpers ----------------------------------------------------------------------------------

    def _pick(self, options: list[str], *key: Any) -> str:
        rng = random.Random("|".join([str(self.seed), *map(str, key)]))
        return options[rng.randrange(len(options))]

    def _final(self, request: ModelRequest, text: str) -> ModelResponse:
        return ModelResponse(text=text, usage=self._usage(request, _words(text)))

    def _calls(self, request: ModelRequest, calls: list[ToolCall], text: str = "") -> ModelResponse:
        out = _words(text) + sum(4 + sum(_words(str(v)) for v in c.arguments.values()) for c in calls)
        return ModelResponse(text=text, tool_calls=calls, usage=self._usage(request, out))

    @staticmethod
    def _usage(request: ModelRequest, output_tokens: int) -> Usage:
        words = _words(request.system) + sum(_words(m.text) for m in request.messages)
        return Usage(input_tokens=words, output_tokens=max(1, output_tokens))

    @staticmethod
    def _delegation_tool(request: ModelRequest) -> ToolSpec | None:
        candidates = [t for t in request.tools
                      if {"description", "prompt"} <= set((t.parameters or {}).get("properties", {}))]
        for tool in candidates:
            if tool.name == "subagent":
                return tool
        return candidates[0] if candidates else None

    @staticmethod
    def _has_background(tool: ToolSpec) -> bool:
        return "run_in_background" in (tool.parameters or {}).get("properties", {})

    @staticmethod
    def _instruction_index(messages: list[Message]) -> int | None:
        for position in range(len(messages) - 1, -1, -1):
            if _is_instruction(messages[position]):
                return position
        return None

    @staticmethod
    def _results(messages: list[Message]) -> dict[str, Message]:
        return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id is not None}

    def _acknowledge(self, request: ModelRequest, notices: list[Message]) -> ModelResponse:
        heads = []
        for notice in notices:
            lines = notice.text.strip().splitlines()
            heads.append(lines[0] if lines else "(empty notice)")
        who = "" if request.label is None else f"[{request.label}] "
        return self._final(request, f"{who}Noted: " + " ".join(heads))

    # -- the root: plan, fan out, collect ----------------------------------------------------------

    def _root(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        index = self._instruction_index(messages)
        if index is None:
            return self._final(request, "There is no task in this conversation yet.")
        topic = _topic(messages[index].text)
        after = messages[index + 1:]
        steps = [m for m in after if m.role == "assistant"]
        tool = self._delegation_tool(request)
        if tool is None:
            return self._final(request, f'No delegation tool is available here, so a direct answer on "{topic}": '
                                        f"{self._pick(ANSWERS['draft'], 'draft', topic).format(s=_quoted(topic))}")
        if not steps:
            calls = []
            for role in FANOUT:
                arguments: dict[str, Any] = {"description": role, "prompt": PROMPTS[role].format(topic=topic)}
                if self._has_background(tool):
                    arguments["run_in_background"] = False
                calls.append(ToolCall(tool.name, arguments))
            return self._calls(request, calls, f'Plan for "{topic}": research, analyse and draft in parallel, '
                                               "then a background review.")
        if len(steps) == 1 and self._has_background(tool):
            return self._calls(request, [ToolCall(tool.name, {
                "description": "review", "prompt": PROMPTS["review"].format(topic=topic), "run_in_background": True})])
        if len(steps) == 2 and len(steps[1].tool_calls) == 1:
            started = self._results(after).get(steps[1].tool_calls[0].id)
            text = started.text if started is not None else ""
            names = request.tool_names
            job = re.match(r"started background subagent job (\S+)", text)
            if job and "job_output" in names:
                return self._calls(request, [ToolCall("job_output", {"job_id": job.group(1), "wait": True,
                                                                     "timeout_ms": 60000})])
            child = re.match(r"started subagent (\S+)", text)
            if child and "send_message" in names:
                return self._calls(request, [ToolCall("send_message", {
                    "subagent_id": child.group(1), "message": FOLLOW_UP.format(topic=topic)})])
        return self._summary(request, topic, steps, after)

    def _summary(self, request: ModelRequest, topic: str, steps: list[Message], after: list[Message]) -> ModelResponse:
        results = self._results(after)
        lines = [f'Summary for "{topic}":']
        delegated = answered = 0
        for step in steps:
            for call in step.tool_calls:
                result = results.get(call.id)
                body = _one_line(result.text) if result is not None else "(no result)"
                failed = result is not None and result.is_error
                if "description" in call.arguments:
                    delegated += 1
                    label = call.arguments["description"]
                    if failed:
                        lines.append(f"- {label}: could not be delegated ({body})")
                    elif re.match(r"started (background subagent job|subagent) ", body):
                        continue  # reported with the collection step below
                    else:
                        answered += 1
                        lines.append(f"- {label}: {body}")
                elif call.name == "job_output":
                    body = re.sub(r"\s*\[status: [^\]]*\]$", "", result.text.strip()) if result is not None else ""
                    status = re.search(r"\[status: ([^\]]*)\]$", result.text.strip()) if result is not None else None
                    if status and status.group(1) == "completed":
                        answered += 1
                        lines.append(f"- review (job {call.arguments['job_id']}): {_one_line(body)}")
                    else:
                        lines.append(f"- review (job {call.arguments['job_id']}): not finished "
                                     f"[status: {status.group(1) if status else 'unknown'}]")
                elif call.name == "send_message":
                    lines.append(f"- review (subagent {call.arguments['subagent_id']}): asked a follow-up; "
                                 "its answer arrives with its settlement notice.")
        lines.append(f"{answered} of {delegated} delegated tasks answered.")
        return self._final(request, "\n".join(lines))

    # -- children: answer, delegate once, follow up --------------------------------------------------

    def _child(self, request: ModelRequest) -> ModelResponse:
        messages = request.messages
        index = self._instruction_index(messages)
        label = request.label or "child"
        if index is None:
            return self._final(request, f"[{label}] There is no task for me yet.")
        prompt = messages[index].text
        subject = _subject(prompt)
        role = _role(label)
        after = messages[index + 1:]
        steps = [m for m in after if m.role == "assistant"]
        instructions = [m for m in messages if _is_instruction(m)]
        if len(instructions) > 1:  # a follow-up turn: answer it, about the original task
            original = _quoted(_subject(instructions[0].text))
            ask = _topic(prompt, 80)
            if role == "review":
                text = self._pick(FOLLOW_UP_ANSWERS, "follow-up", label, ask).format(s=original)
            elif role == "editor":
                text = f'Revised {original} as asked ("{ask}").'
            else:
                text = f'[{label}] Follow-up handled: "{ask}" (about {original}).'
            return self._final(request, text)
        tool = self._delegation_tool(request)
        if role == "research" and request.depth == 1 and tool is not None and not steps:
            arguments: dict[str, Any] = {"description": "sources", "prompt": PROMPTS["sources"].format(topic=subject)}
            if self._has_background(tool):
                arguments["run_in_background"] = False
            return self._calls(request, [ToolCall(tool.name, arguments)])
        if role is None:
            count = _words(prompt)
            text = (f'[{label}] Done: "{_topic(prompt, 80)}" \u2014 handled in {count} '
                    f'word{"" if count == 1 else "s"} of input.')
        else:
            text = self._pick(ANSWERS[role], role, subject).format(s=_quoted(subject))
        if steps and len(steps) <= MAX_CHILD_STEPS:
            results = self._results(after)
            for call in steps[0].tool_calls:
                result = results.get(call.id)
                if result is not None and not result.is_error:
                    text += f" (Backed by: {_one_line(result.text)})"
                elif result is not None:
                    text += f" (sources unavailable: {_one_line(result.text)})"
        return self._final(request, text)
