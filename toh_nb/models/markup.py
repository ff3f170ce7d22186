"""Chat-template markup kept out of answers, and tool results worded for small models.

Why: a small model echoes what it reads. Shown its tool results inside ``<tool_response …>`` tags it
answered with those tags (SmolLM2-135M, 4 runs of 5), and at a text-only step it sometimes writes a
``<tool_call>`` block as prose. Two things follow, shared by LocalModel and OpenAIChatModel's
``llama.cpp`` profile:

- :func:`result_message` words one step's tool results as a plain user message the model answers from
  ("Here is the answer of the subagent: … Using it, reply to my request in your own words." — measured on
  SmolLM2: it answered from the result where the tagged form was parroted); a background subagent start
  and a job's completion notice (:func:`notice_text`) name the exact ``job_output`` call to make, id
  included (the transcript keeps the reference's exact texts; this is only what the model reads);
- :class:`MarkupFilter` removes what is template markup and never an answer — ``<tool_call>`` blocks
  (closed or cut off), the ``<tool_response …>`` / ``</tool_response>`` tags (their content is kept),
  ChatML's ``<|im_start|>`` / ``<|im_end|>`` — from streamed text, holding back only the few
  characters that may start such markup, so the deltas shown join to exactly the final text.
"""

from __future__ import annotations

import re
from typing import Sequence

#: what can open markup (the filter holds back a tail that may still become one of these)
_OPENERS = ("<tool_call>", "<tool_response", "</tool_response>", "</tool_call>", "<|im_start|>", "<|im_end|>")
_CALL_OPEN, _CALL_CLOSE = "<tool_call>", "</tool_call>"
#: markup removed in place (a tool_response tag may carry attributes: name="…")
_TAGS = re.compile(r"<tool_response(?:\s[^<>]*)?>|</tool_response>|</tool_call>|<\|im_end\|>|<\|im_start\|>")


def strip_markup(text: str) -> str:
    """``text`` without chat-template markup (see the module docstring)."""
    out = MarkupFilter()
    return out.feed(text) + out.flush()


class MarkupFilter:
    """Streaming :func:`strip_markup`: ``feed`` returns what can be shown now, ``flush`` the rest."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        shown = []
        while True:
            start = text.find(_CALL_OPEN)
            if start == -1:
                break
            end = text.find(_CALL_CLOSE, start)
            if end == -1:  # a call block still open: hold it (dropped at flush if never closed)
                shown.append(text[:start])
                self._held = text[start:]
                return _TAGS.sub("", "".join(shown)) if shown else ""
            shown.append(text[:start])
            text = text[end + len(_CALL_CLOSE):]
        cut = _open_tail(text)
        self._held = text[cut:]
        shown.append(text[:cut])
        return _TAGS.sub("", "".join(shown))

    def flush(self) -> str:
        """The held tail at the end of the text: a cut-off call block is dropped, a lone ``<`` kept."""
        held, self._held = self._held, ""
        if held.startswith(_CALL_OPEN):
            return ""
        return _TAGS.sub("", held)


def _open_tail(text: str) -> int:
    """Where a tail that may still become markup starts (``len(text)`` when there is none)."""
    cut = text.rfind("<")
    if cut == -1:
        return len(text)
    tail = text[cut:]
    if ">" in tail:
        return len(text)
    if any(opener.startswith(tail) or (tail.startswith("<tool_response") and opener == "<tool_response")
           for opener in _OPENERS):
        return cut
    return len(text)


# -- tool results as a plain message -------------------------------------------------------------------

#: closes the message of one step's tool results (it makes a small model answer from them)
RESULTS_CLOSING = "Using it, reply to my request in your own words."


def result_intro(name: str | None, is_error: bool = False) -> str:
    """The line that introduces one tool result (no quote, apostrophe, ``&``, ``<`` or ``>``: a server
    whose template HTML-escapes messages would show the model ``&#39;``)."""
    if name == "subagent":
        return "The subagent failed:" if is_error else "Here is the answer of the subagent:"
    what = f"the {name} tool" if name else "the tool"
    return f"{what[0].upper()}{what[1:]} failed:" if is_error else f"Here is what {what} returned:"


#: the reference's result of a background subagent start (``toh_nb.subagents.texts.started_job``)
_STARTED_JOB = re.compile(r"^started background subagent job (\S+)$")
#: the reference's completion notice of a background job (``toh_nb.jobs.texts.completion_notice``)
_JOB_NOTICE = re.compile(r"^background job (\S+) \(")


def read_job_hint(job_id: str) -> str:
    """Which call reads a background job's answer, with its exact arguments.

    As JSON, the way the call is written: told "call job_output with job_id subagent-1", SmolLM2 wrote
    ``{"job_id": "job_id-1"}``; a small model copies the value that follows ``"job_id": "`` in its context.
    (A server whose template HTML-escapes messages shows the quotes as ``&#34;``; the id stays readable.)"""
    return f'To read its answer, call job_output with {{"job_id": "{job_id}", "wait": true}}.'


def started_job_text(job_id: str) -> str:
    """A background subagent start, worded for a small model: the job id to pass and the call to make
    (SmolLM2 guessed job ids 4 runs of 5 from the bare ``started background subagent job <id>``)."""
    return (f"The subagent is working in the background as job {job_id}; its answer is not here yet. "
            f"{read_job_hint(job_id)}")


def result_message(results: Sequence[tuple[str | None, str, bool]]) -> str:
    """One user message for one step's results ``(tool name, text, is_error)``.

    A background subagent start says which id to pass to ``job_output`` (:func:`started_job_text`), and a
    step whose only results are such starts does not ask for a reply from them (there is none yet)."""
    parts, waiting = [], True
    for name, text, is_error in results:
        started = _STARTED_JOB.match(text) if name == "subagent" and not is_error else None
        if started:
            parts.append(started_job_text(started.group(1)))
            continue
        waiting = False
        parts.append(f"{result_intro(name, is_error)}\n\n{text}")
    return "\n\n".join(parts) if waiting else "\n\n".join(parts) + "\n\n" + RESULTS_CLOSING


def notice_text(text: str, source: object) -> str:
    """A user-role message as a small model reads it: a background job's completion notice (the
    reference's exact text) gets the ``job_output`` call with its exact id appended; anything else is
    unchanged."""
    if getattr(source, "plugin", None) == "tool-jobs" and getattr(source, "form", None) == "notice":
        notice = _JOB_NOTICE.match(text)
        if notice:
            return f"{text}\n\n{read_job_hint(notice.group(1))}"
    return text
