"""Record/replay: run a notebook against a real LLM once, then re-execute it offline, deterministically.

Why: a notebook made with a real model should still execute in CI, without a key, a network or a
bill, and give the same outputs. :class:`RecordingModel` wraps any model and appends every exchange
to a JSONL file; :class:`ReplayModel` serves the recorded responses back and fails loudly
(:class:`~toh_nb.core.errors.ReplayMissError`, naming the agent and turn) on a request that was never
recorded, so a changed prompt cannot silently replay a stale answer.

Each line of the recording is one exchange::

    {"v": 1, "digest": "<sha256>", "agent": "root/research", "label": "research", "depth": 1,
     "turn": 1, "step": 2, "request": {...}, "response": {...}}        # or "error": "..." instead

``request`` is the canonical form of what the model was asked — ``system``, ``messages`` (role,
content blocks, and the source kind of user messages), ``tools`` and ``max_tokens`` — and nothing
that changes between runs by itself: no agent id, no message ids, no sender session ids, no times.
``digest`` is the sha256 of that canonical JSON (sorted keys, compact separators) after UUIDs are
replaced by numbered placeholders in order of appearance (``<uuid-1>``, ``<uuid-2>``, …), so a text
such as "started subagent 0b6f…" matches across runs even in the default ``ids="uuid"`` mode.
Recordings are still best made with ``ids="sequential"``: recorded *responses* are replayed verbatim,
and a response that quotes a uuid of the recording run (e.g. a model sending a message to a child by
id) names an agent that does not exist in the replay. A request asked several times (twin agents,
retries of identical prompts) is served its recorded responses in recorded order; asking more often
than recorded is a miss. A model error is recorded too and replayed as the same ``ModelError``.

Secrets: the canonical request holds no credentials, and as a second guard every string the inner
model reports as secret (``OpenAIChatModel``'s API key), the ``OPENAI_API_KEY`` environment variable
and any ``scrub=`` strings are replaced by ``<redacted>`` before a line is written. The digest is
computed before scrubbing, so scrubbing never changes which request a response answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from ..core.content import ToolCall, block_to_json, usage_from_json, usage_to_json
from ..core.errors import ModelError, ReplayMissError, UsageError
from ..core.threads import run_engine
from ..core.model import ModelRequest, ModelResponse, call_off_loop

FORMAT_VERSION = 1

UUID_PATTERN = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")


def canonical_request(request: ModelRequest) -> dict:
    """The run-independent part of a request: what the model was actually asked."""
    messages = []
    for message in request.messages:
        entry: dict[str, Any] = {"role": message.role, "content": [block_to_json(b) for b in message.content]}
        if message.role == "user" and message.source is not None:
            entry["source"] = message.source.kind
        messages.append(entry)
    return {
        "system": request.system,
        "messages": messages,
        "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in request.tools],
        "max_tokens": request.max_tokens,
    }


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalise_uuids(text: str) -> str:
    """Replace each distinct UUID by ``<uuid-N>``, numbered in order of first appearance."""
    seen: dict[str, str] = {}

    def placeholder(match: re.Match) -> str:
        value = match.group(0).lower()
        if value not in seen:
            seen[value] = f"<uuid-{len(seen) + 1}>"
        return seen[value]

    return UUID_PATTERN.sub(placeholder, text)


def request_digest(request: ModelRequest | dict) -> str:
    """Stable sha256 of a request (a ``ModelRequest`` or its :func:`canonical_request` dict)."""
    data = canonical_request(request) if isinstance(request, ModelRequest) else request
    return hashlib.sha256(normalise_uuids(canonical_json(data)).encode("utf-8")).hexdigest()


def response_to_json(response: ModelResponse) -> dict:
    return {
        "text": response.text,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls],
        "usage": usage_to_json(response.usage),
        "stop_reason": response.stop_reason,
    }


def response_from_json(data: dict) -> ModelResponse:
    usage = data.get("usage") or {}
    return ModelResponse(
        text=data.get("text", ""),
        tool_calls=[ToolCall(c["name"], dict(c.get("arguments") or {}), c.get("id")) for c in data.get("tool_calls", [])],
        usage=usage_from_json(usage),
        stop_reason=data.get("stop_reason"),
    )


class RecordingModel:
    """Wraps a real model and appends each exchange to a JSONL file, to replay it offline with ``ReplayModel``.

    Every request, with its response or error, becomes one line keyed by a digest of what the model was
    asked (system prompt, messages, tools, ``max_tokens``; no ids or times), so the same notebook replays
    without a key, a network or a bill. The API key of the inner model, ``OPENAI_API_KEY`` and the
    ``scrub=`` strings are written as ``<redacted>``. Record with ``ids="sequential"``: responses are replayed
    verbatim, and one that quotes a random id would name an agent the replay does not have.

    Args:
        inner: the model to record (any ``tn.Model``).
        path: the JSONL file to append to (its directory is created).
        overwrite: start the file empty instead of appending.
        scrub: more strings to redact from every line written.

    Raises:
        OSError: the file's directory cannot be created or the file cannot be written.
    """

    def __init__(self, inner: Any, path: str | os.PathLike, *, overwrite: bool = False,
                 scrub: Iterable[str] = ()) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if overwrite:
            self.path.write_text("", encoding="utf-8")
        self._scrub_extra = [s for s in scrub if s]
        self.count = 0
        self._write_lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"RecordingModel({self.inner!r}, {str(self.path)!r})"

    def _secrets(self) -> list[str]:
        values = list(self._scrub_extra)
        redact = getattr(self.inner, "redact_values", None)  # a model holding secrets names them (OpenAIChatModel)
        if callable(redact):
            values.extend(redact())
        env = os.environ.get("OPENAI_API_KEY")
        if env:
            values.append(env)
        return sorted({v for v in values if isinstance(v, str) and len(v) >= 4}, key=len, reverse=True)

    def _write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, sort_keys=False)
        for secret in self._secrets():
            line = line.replace(secret, "<redacted>")
            escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
            if escaped != secret:
                line = line.replace(escaped, "<redacted>")
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self.count += 1

    async def _append(self, record: dict) -> None:
        """Write off the loop thread (a slow disk must not stall every agent), one record at a time so
        the file keeps the order of the exchanges."""
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            await run_engine(self._write, record)

    async def request(self, request: ModelRequest) -> ModelResponse:
        canonical = canonical_request(request)
        record: dict[str, Any] = {
            "v": FORMAT_VERSION, "digest": request_digest(canonical), "agent": request.path,
            "label": request.label, "depth": request.depth, "turn": request.turn, "step": request.step,
            "request": canonical,
        }
        try:
            response = await call_off_loop(self.inner.request, request)
        except Exception as error:  # recorded, so the replay fails the same way; cancellation is not
            record["error"] = str(error) or type(error).__name__
            await self._append(record)
            raise
        from ..core.model import coerce_response

        response = coerce_response(response)
        record["response"] = response_to_json(response)
        await self._append(record)
        return response

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


class ReplayModel:
    """Serves the responses of a ``RecordingModel`` file by request digest: a recorded session, offline.

    A request asked several times is served its recorded responses in order; a recorded model error is
    replayed as the same ``ModelError``.

    Args:
        path: the recording (a JSONL file written by ``RecordingModel``).

    Raises:
        UsageError: there is no file at ``path``, or a line of it is not a recorded exchange.
        ReplayMissError: (from a request, ending that turn ``error``) a request that was never recorded,
            naming the agent and turn: the prompts, tools or system prompt changed since the recording.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise UsageError(f"no recording at {self.path}: make one with RecordingModel(model, {str(self.path)!r})")
        self.entries: list[dict] = []
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or "digest" not in entry or ("response" not in entry and "error" not in entry):
                    raise ValueError("not a recorded exchange")
            except ValueError as exc:
                raise UsageError(f"{self.path}:{number}: unreadable recording line ({exc})") from None
            self.entries.append(entry)
        self._by_digest: dict[str, list[dict]] = defaultdict(list)
        for entry in self.entries:
            self._by_digest[entry["digest"]].append(entry)
        self._served: dict[str, int] = defaultdict(int)
        self.requests: list[ModelRequest] = []

    def __repr__(self) -> str:
        return f"ReplayModel({str(self.path)!r}, {len(self.entries)} exchanges)"

    def reset(self) -> None:
        """Serve the recording from the start again (e.g. before re-running a notebook)."""
        self._served.clear()
        self.requests.clear()

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        canonical = canonical_request(request)
        digest = request_digest(canonical)
        candidates = self._by_digest.get(digest, [])
        position = self._served[digest]
        if position >= len(candidates):
            raise ReplayMissError(self._miss_message(request, canonical, digest, len(candidates)))
        self._served[digest] = position + 1
        entry = candidates[position]
        if "error" in entry:
            raise ModelError(entry["error"])
        return response_from_json(entry["response"])

    def _miss_message(self, request: ModelRequest, canonical: dict, digest: str, recorded: int) -> str:
        who = f'agent "{request.path}" (label {request.label!r}), turn {request.turn}, step {request.step}'
        if recorded:
            detail = (f"this request was recorded {recorded} time(s) and all of them were already served; "
                      "call reset() to replay from the start")
        else:
            detail = self._difference(request, canonical)
        return (f"ReplayModel: no recorded response for {who} in {self.path} ({detail}). Hint: re-record with "
                f"RecordingModel(model, path) after changing prompts, system prompts, tools or max_tokens; "
                f"record with ids=\"sequential\" for reproducible runs. Last user message: "
                f"{request.last_user_text[:120]!r}")

    def _difference(self, request: ModelRequest, canonical: dict) -> str:
        same_place = [e for e in self.entries
                      if e.get("agent") == request.path and e.get("turn") == request.turn
                      and e.get("step") == request.step and isinstance(e.get("request"), dict)]
        if not same_place:
            return "nothing was recorded for this agent, turn and step"
        recorded = same_place[0]["request"]
        for key in ("system", "tools", "max_tokens"):
            if normalise_uuids(canonical_json(recorded.get(key))) != normalise_uuids(canonical_json(canonical[key])):
                return f"the recorded request for this agent, turn and step differs in {key}"
        old, new = recorded.get("messages") or [], canonical["messages"]
        for index in range(max(len(old), len(new))):
            if index >= len(old) or index >= len(new):
                return f"the recorded request had {len(old)} message(s), this one has {len(new)}"
            if normalise_uuids(canonical_json(old[index])) != normalise_uuids(canonical_json(new[index])):
                return f"the recorded request for this agent, turn and step differs in messages[{index}] ({new[index]['role']})"
        return "the recorded request for this agent, turn and step differs only in the numbering of ids"
