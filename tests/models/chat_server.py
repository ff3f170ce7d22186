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

Strict like the servers people run, so adapter regressions cannot hide here (each rule below was
measured on llama-cpp-python's server, see the adapter's profiles module):

- always: a stream ends with its usage chunk only when ``stream_options.include_usage`` is true (as
  OpenAI streams do); an assistant message with ``"content": null`` is an HTTP 500 with llama-cpp-python's pydantic
  message; ``max_tokens`` (or ``max_completion_tokens``) is honoured on scripted JSON replies, one
  character being one token: longer text or tool arguments are cut, the usage says ``max_tokens``
  tokens and ``finish_reason`` becomes ``"length"`` (``"tool_calls"`` for a cut call in the llama.cpp
  flavours, which hard-code it);
- ``flavour="llama.cpp"`` (llama-cpp-python's server, ``chatml-function-calling``): without a
  ``tool_choice`` (or with ``"none"``) the tools never reach the model: responders see no tools and a
  scripted tool call comes back as text in the template's call syntax; ``"required"`` is an HTTP 500
  with an empty message; a forced ``{"type": "function", ...}`` choice always yields a call to that
  function (the scripted one, or one with ``server.forced_arguments[name]``); in ``"auto"`` mode a text
  reply comes back empty and a streamed tool call is a 200 with an empty body; ``stream_options`` and
  ``max_completion_tokens`` are ignored (a stream never ends with a usage chunk);
- ``flavour="chatml-function-calling"``: the llama.cpp rules, plus tool messages reach responders with
  empty content (the template drops it) and the conversation they see is HTML-escaped.

Streams can be cut as real servers cut them: :func:`stream_cut` ends without a ``finish_reason``
(``done=True``: with ``[DONE]``, as llama-cpp-python's ``interrupt_requests`` does; ``done=False``: the
connection just closes, e.g. after one chunk). ``Received.seen`` is the body as the "model" saw it
(after the flavour's rules), ``Received.body`` what the adapter sent.

What the transport saw, for tests of who talks to the server and how: ``api_key="sk-…"`` makes every
request without ``Authorization: Bearer sk-…`` an HTTP 401 (as hosted APIs answer); ``connections``
lists the client address of each TCP connection accepted (keep-alive reuse adds none);
``disconnects`` counts requests whose client went away while their reply was delayed (:func:`hang`):
the handler watches the socket during the delay, as servers that cancel abandoned generations do.
"""

from __future__ import annotations

import html
import json
import select
import socket
import threading
import time
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
    #: end an event stream with ``data: [DONE]`` (False: the connection just closes)
    done: bool = True


@dataclass
class Received:
    path: str
    headers: dict
    body: Any  # decoded JSON, or the raw text if it was not JSON
    #: the body as the model saw it after the flavour's rules (tools dropped, tool content dropped, …)
    seen: Any = None


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


def _without_usage_chunk(reply: Reply) -> Reply:
    """A stream as sent without ``stream_options.include_usage``: its usage chunk left out."""
    if reply.events is None:
        return reply
    events = [e for e in reply.events if not (isinstance(e, dict) and e.get("usage") and not e.get("choices"))]
    return Reply(reply.status, reply.body, reply.headers, events, reply.delay, reply.content_type, reply.done)


def stream_cut(pieces: list[str], *, done: bool = True) -> Reply:
    """A text stream that ends without a finish_reason: with ``[DONE]`` or (``done=False``) a bare close."""
    events = [_chunk({"role": "assistant", "content": ""})] + [_chunk({"content": piece}) for piece in pieces]
    return Reply(events=events, done=done)


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


# -- the strict rules (see the module docstring) ----------------------------------------------------

FLAVOURS = ("openai", "llama.cpp", "chatml-function-calling")


def null_content_error(index: int) -> Reply:
    """llama-cpp-python's answer to ``{"role": "assistant", "content": null}`` (its pydantic union fails)."""
    message = ("7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', %d, "
               "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\"}\n  "
               "{'type': 'string_type', 'loc': ('body', 'messages', %d, 'ChatCompletionRequestAssistantMessage', "
               "'content'), 'msg': 'Input should be a valid string', 'input': None}" % (index, index))
    return Reply(status=500, body={"error": {"message": message, "type": "internal_server_error", "param": None,
                                             "code": None}})


def _calls_as_text(calls: list[dict]) -> str:
    return "".join(f"functions.{c['function']['name']}:\n{c['function']['arguments']}" for c in calls)


class ChatServer:
    def __init__(self, flavour: str = "openai", *, api_key: str | None = None) -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {flavour!r}; expected one of {FLAVOURS}")
        self.flavour = flavour
        #: arguments of a call forced by ``tool_choice`` when the scripted reply does not make that call
        self.forced_arguments: dict[str, dict] = {}
        self.script: deque[Reply] = deque()
        self.responder: Callable[[Any], Reply] | None = None
        self.requests: list[Received] = []
        #: the key every request must carry as ``Authorization: Bearer <key>`` (None: any or none)
        self.api_key = api_key
        #: client addresses of the TCP connections accepted, in order
        self.connections: list[tuple] = []
        #: requests whose client disconnected while their (delayed) reply was pending
        self.disconnects = 0
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
    def llama(self) -> bool:
        return self.flavour != "openai"

    def _seen(self, body: Any) -> Any:
        """The request as the model sees it under this flavour's template."""
        if not isinstance(body, dict) or not self.llama:
            return body
        seen = dict(body)
        if seen.get("tool_choice") in (None, "none"):
            seen.pop("tools", None)
        if self.flavour == "chatml-function-calling":
            messages = []
            for message in seen.get("messages") or []:
                message = dict(message)
                if message.get("role") == "tool":
                    message["content"] = ""
                elif isinstance(message.get("content"), str):
                    message["content"] = html.escape(message["content"])
                messages.append(message)
            seen["messages"] = messages
        return seen

    def _answer(self, body: Any) -> Reply:
        """The reply to ``body`` after the strict rules: rejections, the flavour's tool rules, max_tokens."""
        if not isinstance(body, dict):
            return self._next_reply(body)
        for index, message in enumerate(body.get("messages") or []):
            if message.get("role") == "assistant" and message.get("content", "") is None:
                return null_content_error(index)
        choice = body.get("tool_choice")
        if self.llama and choice == "required" and body.get("tools"):
            return Reply(status=500, body={"error": {"message": "", "type": "internal_server_error", "param": None,
                                                     "code": None}})
        reply = self._next_reply(self._seen(body))
        if self.llama and body.get("tools"):
            reply = self._tool_rules(reply, choice, bool(body.get("stream")))
        limit = body.get("max_tokens")
        if limit is None and not self.llama:
            limit = body.get("max_completion_tokens")
        reply = _cut(reply, limit, "tool_calls" if self.llama else "length")
        if self.llama and body.get("stream"):  # the server streams whatever it answers when asked to
            reply = _as_stream(reply)
        return reply if self._sends_usage(body) else _without_usage_chunk(reply)

    def _sends_usage(self, body: dict) -> bool:
        """Whether a stream ends with a usage chunk: as OpenAI, only when ``stream_options.include_usage``
        asks for it; never in the llama.cpp flavours (they ignore ``stream_options``)."""
        options = body.get("stream_options")
        return not self.llama and isinstance(options, dict) and options.get("include_usage") is True

    def _tool_rules(self, reply: Reply, choice: Any, stream: bool) -> Reply:
        message = _message(reply)
        if message is None:
            return reply
        calls = message.get("tool_calls") or []
        if choice in (None, "none"):
            if calls:  # the model never saw the tools: it writes the call syntax it saw in the history
                return _rewrite(reply, {"role": "assistant", "content": _calls_as_text(calls)}, "stop")
            return reply
        if isinstance(choice, dict):
            name = choice["function"]["name"]
            chosen = [c for c in calls if c["function"]["name"] == name][:1] or [
                {"id": f"call__0_{name}_cmpl-test", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(self.forced_arguments.get(name, {}))}}]
            return _rewrite(reply, {"role": "assistant", "content": None, "tool_calls": chosen}, "tool_calls")
        if choice == "auto":
            if calls and stream:  # "Automatic streaming tool choice is not supported": an empty 200 body
                return Reply(body=b"", content_type="text/event-stream")
            if not calls:  # the text branch's grammar only allows the end token
                return _rewrite(reply, {"role": "assistant", "content": ""}, "stop")
        return reply

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
            # HTTP/1.1 keep-alive like real servers (uvicorn): clients pool connections between requests,
            # which is what makes closing a client on the wrong loop fail. Streams close their connection.
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections.append(self.client_address)

            def _client_left(self, seconds: float) -> bool:
                """Wait up to ``seconds`` for the reply's delay; True when the client closed meanwhile."""
                deadline = time.monotonic() + seconds
                while not server._stopping.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
                    if readable:
                        try:
                            gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                        except OSError:
                            gone = True
                        if gone:
                            with server._lock:
                                server.disconnects += 1
                            return True
                return True

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(data) if data else None
                except ValueError:
                    body = data.decode("utf-8", "replace")
                with server._lock:
                    server.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                                                    server._seen(body)))
                if server.api_key is not None and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    reply = error(401, "Incorrect API key provided")
                elif self.path.rstrip("/") != "/v1/chat/completions":
                    reply = error(404, f"no route {self.path}")
                else:
                    reply = server._answer(body)
                if reply.delay and self._client_left(reply.delay):
                    self.close_connection = True
                    return  # shutting down, or the client went away: drop the connection
                try:
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout, cancellation)

            def _send(self, reply: Reply) -> None:
                if reply.events is not None:
                    self.close_connection = True  # the stream ends where the connection does
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
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
                    if reply.done:
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


def _message(reply: Reply) -> dict | None:
    """The assistant message of a scripted JSON completion (None for errors, streams and raw bodies)."""
    body = reply.body
    if reply.status != 200 or reply.events is not None or not isinstance(body, dict) or not body.get("choices"):
        return None
    return body["choices"][0].get("message")


def _as_stream(reply: Reply) -> Reply:
    """A scripted JSON completion sent as the event stream a server sends for it (text in pieces of
    four characters, each call's arguments likewise); anything else unchanged."""
    message = _message(reply)
    if message is None:
        return reply
    choice = reply.body["choices"][0]
    content = message.get("content") or ""
    events = [_chunk({"role": "assistant", "content": None if message.get("tool_calls") else ""})]
    events += [_chunk({"content": content[i:i + 4]}) for i in range(0, len(content), 4)]
    for index, call in enumerate(message.get("tool_calls") or []):
        events.append(_chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                              "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        arguments = call["function"]["arguments"] or ""
        events += [_chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + 4]}}]})
                   for i in range(0, len(arguments), 4)]
    events.append(_chunk({}, choice["finish_reason"]))
    return Reply(status=reply.status, headers=dict(reply.headers), events=events, delay=reply.delay)


def _rewrite(reply: Reply, message: dict, finish_reason: str) -> Reply:
    body = json.loads(json.dumps(reply.body))
    body["choices"][0]["message"] = message
    body["choices"][0]["finish_reason"] = finish_reason
    return Reply(status=reply.status, body=body, headers=dict(reply.headers), delay=reply.delay)


def _cut(reply: Reply, limit: Any, call_finish: str) -> Reply:
    """Honour ``max_tokens`` on a scripted completion: one character is one token."""
    message = _message(reply)
    if message is None or not isinstance(limit, int):
        return reply
    calls = message.get("tool_calls") or []
    size = len(message.get("content") or "") + sum(len(c["function"]["arguments"]) for c in calls)
    if size <= limit:
        return reply
    left = limit
    content = message.get("content")
    if content:
        content, left = content[:left], max(0, left - len(content))
    cut_calls = []
    for call in calls:
        arguments = call["function"]["arguments"]
        cut_calls.append({**call, "function": {**call["function"], "arguments": arguments[:left]}})
        left = max(0, left - len(arguments))
    cut = {**message, "content": content}
    if calls:
        cut["tool_calls"] = cut_calls
    reply = _rewrite(reply, cut, call_finish if calls else "length")
    usage = reply.body.get("usage")
    if usage:
        usage["completion_tokens"] = limit
        usage["total_tokens"] = usage["prompt_tokens"] + limit
    return reply


def delegation_reply(body: dict) -> Reply:
    """A two-agent script: the root delegates "add 2+2" through `subagent`, the child answers 4, the
    root reports what the child said (used by the hub delegation tests of the adapter and recordings).

    The child's answer reaches the root as a tool message, or as a user message "Here is the
    subagent's answer: …" (tool results rendered as text); under a template that drops tool content the root hears nothing.
    """
    last = body["messages"][-1]
    content = last.get("content") or ""
    if last["role"] == "tool":
        return text(f"child said: {content}")
    if content.startswith("Here is the answer of the subagent:"):
        return text(f"child said: {content.split(chr(10))[2]}")
    if "add 2+2" in content:
        return text("4")
    return tool_calls([("call_sub", "subagent", {"description": "sum", "prompt": "add 2+2"})])
