"""Result objects returned to users (async and sync faces share them).

Every object has a deterministic ``repr`` (no timestamps, no addresses) so stored notebook outputs
compare stably, and an ``_repr_html_`` for a richer notebook display.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from typing import Any

from .core.content import Usage, text_of

from .core.tools import error_text
from .subagents import texts as subagent_texts
from .subagents.listing import AgentList
from .subagents.settlement import EPOCH_TURN_TO_STOP as TURN_TO_STOP  # a root turn maps like an epoch


STATUS_COLOURS = {
    "running": "#1565c0", "stopping": "#ef6c00", "idle": "#2e7d32", "ready": "#6a1b9a",
    "completed": "#2e7d32", "killed": "#6d4c41", "failed": "#c62828", "finished": "#455a64",
    "corrupt": "#c62828",
}


def short_id(ident: str | None, keep: int = 8) -> str:
    """A display form of an id: uuids (and other long ids) cut to their first ``keep`` characters plus
    ``…``; short ids (``agent-3``, ``subagent-1``, ``root``) unchanged. Full ids stay in tools, tables'
    data, ``text/plain`` reprs and hover titles."""
    if not ident:
        return ident or ""
    if len(ident) <= 16:
        return ident
    return ident[:keep] + "\u2026"


def id_html(ident: str) -> str:
    """``<code title="full id">short id</code>``: how HTML displays show an id."""
    return f"<code title='{html.escape(ident)}'>{html.escape(short_id(ident))}</code>"


def status_badge(status: str | None) -> str:
    text = status or "?"
    colour = STATUS_COLOURS.get(text, "#455a64")
    return f"<b style='color:{colour}'>[{html.escape(text)}]</b>"


def item_html(css: str, ident: str, status: str | None, label: str | None, extra: str = "") -> str:
    label_html = f" \u2014 {html.escape(label)}" if label else ""
    return (f"<div class='{css}'>{id_html(ident)} {status_badge(status)}{label_html}"
            f"{extra}</div>")


@dataclass(slots=True)
class RunResult:
    """The outcome of a run: what a foreground ``hub.spawn``, ``hub.run`` or a finished job returns.

    Raises nothing: a plain record. ``ok`` tells whether the run completed; for a failed run ``text`` still
    holds what the model produced before the end and ``diagnostic`` says why it ended.

    Args:
        text: the final text of the run.
        output: the final content blocks.
        stop_reason: ``completed``, ``aborted``, ``error``, ``max-tokens``, ``max-steps``, ``token-budget``,
            ``max-time`` or ``refusal``.
        agent_id: the id of the agent that ran.
        usage: the tokens the run used.
        diagnostic: for a run that did not complete, what ended it.
        label: the agent's label.
        cause: for a run that ended ``error``, what failed in one word (``model``, ``store``,
            ``agent process``, ``placement`` …); None otherwise.
    """

    text: str
    output: list = field(default_factory=list)
    stop_reason: str = "completed"
    agent_id: str = ""
    usage: Usage = field(default_factory=Usage)
    diagnostic: str | None = None
    label: str | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.stop_reason == "completed"

    def __str__(self) -> str:
        """The text; a run that did not complete says so first (``[error: <diagnostic>] <text>``), so a
        failure printed is never an empty line."""
        if self.ok:
            return self.text
        why = (self.diagnostic or subagent_texts.headline(self.stop_reason).removeprefix("subagent ")).strip()
        return f"[{self.stop_reason}: {why}]" + (f" {self.text}" if self.text else "")

    def __repr__(self) -> str:
        extra = f", diagnostic={self.diagnostic!r}" if self.diagnostic else ""
        estimated = " (estimated)" if self.usage.estimated else ""
        return (f"RunResult(agent={self.agent_id}, stop_reason={self.stop_reason}, text={self.text!r}, "
                f"tokens={self.usage.input_tokens}/{self.usage.output_tokens}{estimated}{extra})")

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.ok else "#c62828"
        diag = f"<div><b>diagnostic:</b> {html.escape(self.diagnostic)}</div>" if self.diagnostic else ""
        label = f" \u2014 {html.escape(self.label)}" if self.label else ""
        return (f"<div class='toh-run'><div>{id_html(self.agent_id)}{label} "
                f"<span style='color:{colour}'>[{html.escape(self.stop_reason)}]</span> "
                f"<small>{self.usage.input_tokens} in / {self.usage.output_tokens} out tokens"
                f"{' (estimated)' if self.usage.estimated else ''}</small></div>"
                f"<pre style='white-space:pre-wrap'>{html.escape(self.text)}</pre>{diag}</div>")


def run_result(outcome, agent_id: str, label: str | None = None) -> RunResult:
    """A RunResult from a turn outcome (``TurnOutcome``) or a one-shot ``SubagentResult``."""
    if hasattr(outcome, "stop_reason"):
        stop = outcome.stop_reason
        diagnostic = outcome.diagnostic
        usage = outcome.usage or Usage()
    else:
        stop = TURN_TO_STOP.get(outcome.reason, "error")
        diagnostic = outcome.error
        usage = outcome.usage
    cause = (getattr(outcome, "cause", None) or "model") if stop == "error" else None
    return RunResult(text_of(outcome.output), list(outcome.output), stop, agent_id, usage, diagnostic, label, cause)


def job_result(job: Any) -> "RunResult | None":
    """A settled background subagent job's :class:`RunResult` (None while it runs): the child's stop
    reason, diagnostic, partial text and usage, as a foreground run of the same child returns them. A
    job whose child never ran (its start failed; a kill before it started) is an ``error`` / ``aborted``
    result carrying the job's detail."""
    if job.status not in ("completed", "killed", "failed"):
        return None
    if job.result is not None:
        return run_result(job.result, job.child_id or "", job.label)
    stop = "aborted" if job.status == "killed" else "error" if job.status == "failed" else "completed"
    return RunResult(job.output, [], stop, job.child_id or "", Usage(), job.detail, job.label,
                     "model" if stop == "error" else None)


def job_output(job: Any, output: str) -> str:
    """What the notebook's ``job.output()`` returns for a settled job whose registry output is ``output``:
    that text for a completed job; for any other, what the foreground delegation renders for the same
    run (``Error: <headline>``, its ``Diagnostic:`` and ``Partial output before the run ended:``) and
    where the child's whole run is, so a failed job never reads like an empty success."""
    result = job_result(job)
    if result is None or result.ok:
        return output
    if job.result is None and result.diagnostic:  # the child never ran: the job's own detail says why
        text = error_text(result.diagnostic)
    else:
        text = error_text(subagent_texts.failure_text(result.stop_reason, result.diagnostic, result.text))
    return f"{text}\n{subagent_texts.whole_run_at(job.child_id)}" if job.child_id else text


class AgentListing(AgentList):
    """``hub.list_agents()``: the engine's entries; ``str()`` and ``repr()`` are exactly the
    ``list_agents`` tool text, and the notebook shows an HTML table."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if not self:
            return "<div class='toh-agents'><i>(no subagents)</i></div>"
        rows = []
        for entry in self:
            if entry.kind == "diagnostic":
                status = f"<i>diagnostic: {html.escape(entry.reason or '')}</i>"
            else:
                status = status_badge(entry.status)
            parent = id_html(entry.parent) if entry.descendants_form and entry.parent else ""
            depth = "" if entry.depth is None or not entry.descendants_form else str(entry.depth)
            indent = "&nbsp;&nbsp;" * max(0, (entry.depth or 1) - 1) if entry.descendants_form else ""
            rows.append(f"<tr><td style='text-align:left'>{indent}{id_html(entry.id)}</td>"
                        f"<td>{status}</td><td style='text-align:left'>{html.escape(entry.label or '')}</td>"
                        f"<td>{parent}</td><td>{depth}</td></tr>")
        return ("<table class='toh-agents'><thead><tr><th>id</th><th>status</th><th>label</th><th>parent</th>"
                f"<th>depth</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def run_failed(result: RunResult) -> str:
    """The message of the :class:`~toh_nb.core.errors.RunError` a person's call raises for ``result``:
    the run's headline (who, and what failed) and its diagnostic."""
    who = "the root's turn" if not result.label else f'subagent "{result.label}" ({result.agent_id})'
    text = f"{who} failed ({result.cause or 'model'})"
    return f"{text}\nDiagnostic: {result.diagnostic}" if result.diagnostic else text
