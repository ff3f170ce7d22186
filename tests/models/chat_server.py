"""A scripted, offline OpenAI-compatible chat server for tests.

Why a real HTTP server rather than a mocked client: the adapter's retries, timeouts, streaming and
cancellation all live in the HTTP layer of the official ``openai`` client, so the tests exercise the
real client against a real socket. The server is stdlib only (``ThreadingHTTPServer`` in a daemon
thread, bound to 127.0.0.1 on a free port) and speaks ``POST /v1/chat/completions``.

Replies are scripted: push :class:`Reply` objects (built with :func:`text`, :func:`tool_calls`,
:func:`stream_text`, :func:`stream_tool_calls`, :func:`error`, :func:`hang`, :func:`raw`) and each
request pops the next one; or set ``server.responder`` to a function of the decoded request body that
returns a ``Reply``. Every request received is kept in ``server.requests`` (decoded JSON body and
headers) so tests can assert how the adapter mapped a ``ModelRequest``.

Usage (see the ``chat_server`` fixture in the tests)::

    with ChatServer() as server:
        server.push(text("hello"))
        model = OpenAIChatModel("test-model", base_url=server.url, api_key="sk-test")
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    status: int = 200
    #: a JSON-able object (sent as JSON) or raw bytes
    body: Any = None
    headers: dict = field(default_factory=dict)
    #: SSE ``data:`` payloads (dicts, sent as JSON); ``[DONE]`` is appended automatically. A number in
    #: the list is a pause of that many seconds (a stream that stalls mid-way)
    events: list | None = None
    #: seconds to sleep before answering (a hang when longer than the client timeout)
    delay: float = 0.0
    content_type: str = "application/json"


@dataclass
class Received:
    path: str
    headers: dict
    body: Any  # decoded JSON, or the raw text if it was not JSON


def _completion(message: dict, finish_reason: str, usage: tuple[int, int] | None, model: str = "test-model") -> dict:
    data = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
    }
    if usage is not None:
        data["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                         "total_tokens": usage[0] + usage[1]}
    return data


def text(content: str, *, finish_reason: str = "stop", usage: tuple[int, int] | None = (10, 5)) -> Reply:
    return Reply(body=_completion({"role": "assistant", "content": content}, finish_reason, usage))


def tool_calls(calls: list[tuple[str, str, Any]], *, content: str | None = None, finish_reason: str = "tool_calls",
               usage: tuple[int, int] | None = (20, 8)) -> Reply:
    """``calls`` is a list of ``(id, name, arguments)``; dict arguments are JSON-encoded, strings sent as is."""
    message = {"role": "assistant", "content": content, "tool_calls": [
        {"id": cid, "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for cid, name, args in calls]}
    return Reply(body=_completion(message, finish_reason, usage))


def _chunk(delta: dict, finish_reason: str | None = None) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def _usage_chunk(usage: tuple[int, int]) -> dict:
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1700000000, "model": "test-model",
            "choices": [], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                     "total_tokens": usage[0] + usage[1]}}


def stream_text(pieces: list[str], *, finish_reason: str = "stop", usage: tuple[int, int] | None = (12, 3)) -> Reply:
    events = [_chunk({"role": "assistant", "content": ""})]
    events += [_chunk({"content": piece}) for piece in pieces]
    events.append(_chunk({}, finish_reason))
    if usage is not None:
        events.append(_usage_chunk(usage))
    return Reply(events=events)


def stream_tool_calls(calls: list[tuple[str, str, list[str]]], *, content: list[str] = (),
                      usage: tuple[int, int] | None = (30, 9)) -> Reply:
    """``calls`` is a list of ``(id, name, argument_fragments)``; fragments of the calls are interleaved."""
    events = [_chunk({"role": "assistant", "content": None})]
    events += [_chunk({"content": piece}) for piece in content]
    for index, (cid, name, _) in enumerate(calls):
        events.append(_chunk({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                              "function": {"name": name, "arguments": ""}}]}))
    longest = max((len(frags) for _, _, frags in calls), default=0)
    for position in range(longest):
        for index, (_, _, frags) in enumerate(calls):
            if position < len(frags):
                events.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": frags[position]}}]}))
    events.append(_chunk({}, "tool_calls"))
    if usage is not None:
        events.append(_usage_chunk(usage))
    return Reply(events=events)


def error(status: int, message: str, *, headers: dict | None = None) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "test_error", "code": None}},
                 headers=dict(headers or {}))


def hang(seconds: float = 5.0) -> Reply:
    """Answer (a valid reply) only after ``seconds``: longer than the client timeout, it is a hang."""
    reply = text("too late")
    reply.delay = seconds
    return reply


def raw(body: bytes, *, status: int = 200, content_type: str = "application/json") -> Reply:
    return Reply(status=status, body=body, content_type=content_type)


class ChatServer:
    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.responder: Callable[[Any], Reply] | None = None
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -----------------------------------------------------------------------------

    def push(self, *replies: Reply) -> "ChatServer":
        with self._lock:
            self.script.extend(replies)
        return self

    def _next_reply(self, body: Any) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return error(418, "ChatServer: script exhausted (no reply pushed for this request)")

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ChatServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection; streams end at close

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(data) if data else None
                except ValueError:
                    body = data.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    reply = error(404, f"no route {self.path}")
                else:
                    reply = server._next_reply(body)
                if reply.delay and server._stopping.wait(reply.delay):
                    return  # shutting down: drop the connection
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout, cancellation)

            def _send(self, reply: Reply) -> None:
                if reply.events is not None:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    for event in reply.events:
                        if isinstance(event, (int, float)):
                            if server._stopping.wait(event):
                                return
                            continue
                        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                        self.wfile.flush()
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                    return
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def delegation_reply(body: dict) -> Reply:
    """A two-agent script: the root delegates "add 2+2" through `subagent`, the child answers 4, the
    root reports what the child said (used by the hub delegation tests of the adapter and recordings)."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text(f"child said: {last['content']}")
    if "add 2+2" in (last.get("content") or ""):
        return text("4")
    return tool_calls([("call_sub", "subagent", {"description": "sum", "prompt": "add 2+2"})])

