"""The real llama-cpp-python server as ``python -m toh_nb serve-model`` starts it (issue 32.4, 32.5, 32.7).

- what the model reads has no HTML escapes: the prompt of a message full of quotes and apostrophes is as
  many tokens as the same message in plain letters (llama-cpp-python's own template escapes each
  into 5-6 characters);
- an abandoned request stops generating on the server: OpenAIChatModel(profile="llama.cpp") streams it
  (even with ``stream=False``), so cancelling closes the connection and the server ends the generation
  at its next token, instead of running it to ``max_tokens`` while later requests queue behind it.
  The server's log proves it: each generation that runs to its end prints one
  ``llama_perf_context_print: … eval time`` line.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

import toh_nb as tn
from tests.helpers import alive, until
from tests.real.conftest import HAVE_LOCAL, NO_LOCAL
from toh_nb.core.content import Message, Text
from toh_nb.core.model import ModelRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.skipif(not HAVE_LOCAL, reason=NO_LOCAL)]

#: the line llama.cpp prints when a generation ends (not its "prompt eval time" line)
ENDED = re.compile(r"^llama_perf_context_print:\s+eval time =.*/\s+(\d+) runs")


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(f"{url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def prompt_tokens(url: str, text: str) -> int:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": text}], "max_tokens": 1,
            "tools": [{"type": "function", "function": {"name": "noop", "description": "Nothing.",
                                                        "parameters": {"type": "object", "properties": {}}}}],
            "tool_choice": {"type": "function", "function": {"name": "noop"}}}
    return post(url, body)["usage"]["prompt_tokens"]


def test_the_model_reads_quotes_and_apostrophes_unescaped(model_server):
    quoted = prompt_tokens(model_server.url, "I'm \"here\" & it's <fine>. " * 4)
    plain = prompt_tokens(model_server.url, "Im  here  and its  fine . " * 4)
    # escaped, each of the 28 marks would be 4-6 characters of &#39; / &#34; / &amp; / &lt; (dozens of tokens)
    assert abs(quoted - plain) <= 8


def test_an_abandoned_request_stops_generating_on_the_server(model_server):
    started = []
    request = ModelRequest(agent_id="agent-1", label=None, depth=0, system="",
                           messages=[Message("user", [Text("Write a very long story about a dragon, in many "
                                                           "chapters.")])],
                           tools=[], max_tokens=400, on_delta=started.append)
    model = tn.OpenAIChatModel("smollm2", base_url=model_server.url, profile="llama.cpp", temperature=0.0,
                               timeout=600.0, max_retries=0)
    assert model.stream is False  # nobody asked for deltas: the profile streams to be able to cancel

    async def abandon():
        task = asyncio.ensure_future(model.request(request))
        await until(lambda: started, "the first generated text", timeout=600)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await model.aclose()

    before = len(model_server.log_text())
    asyncio.run(abandon())
    # the next request runs only once the server let go of the abandoned one (one model, one lock)
    answer = post(model_server.url, {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}],
                                     "max_tokens": 4})
    assert answer["usage"]["completion_tokens"] <= 4
    log = model_server.log_text()[before:]
    assert "Disconnected from client" in log
    ended = [int(match.group(1)) for line in log.splitlines() if (match := ENDED.match(line))]
    # one generation ran to its end, the second request's (at most 4 tokens); the abandoned one never did
    assert len(ended) == 1 and ended[0] <= 4, ended


#: llama-cpp-python's own report of a cache hit (``Llama.generate``, printed by the verbose server)
PREFIX_HIT = re.compile(r"^Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval$", re.M)


def lookup(query: str) -> str:
    """Look a fact up."""
    return "Paris is the capital of France."


def test_a_none_request_extends_the_forced_one_and_the_next_turn_reuses_the_cache(model_server):
    """Issue 32 item 6: OpenAIChatModel sends ``tool_choice="none"`` with the tools, and serve-model renders
    such a request with its tool list, so each request of the root extends the previous one: the server
    finds all of the previous prompt in its KV cache (its log: the launcher's ``serve-model cache:`` line
    per completion, and llama-cpp-python's own ``prefix-match hit`` line)."""
    from toh_nb.serve.model import CACHE_LINE_PATTERN

    model = tn.OpenAIChatModel("smollm2", base_url=model_server.url, profile="llama.cpp", temperature=0.0,
                               max_tokens=48, tool_choice=lambda r: "lookup" if r.step == 1 else "none",
                               timeout=600.0, max_retries=0)
    seen = []  # per request: (turn, step, [(prompt, reused, evaluated)], [llama-cpp-python's reused counts])

    async def logged(request):
        offset = len(model_server.log_text())
        response = await model.request(request)
        log = model_server.log_text()[offset:]
        lines = [tuple(map(int, m.groups())) for m in re.finditer(CACHE_LINE_PATTERN, log, re.M)]
        seen.append((request.turn, request.step, lines, [int(m.group(1)) for m in PREFIX_HIT.finditer(log)]))
        return response

    async def main():
        async with tn.AsyncHub(model=tn.FunctionModel(logged), ids="sequential", tools=[tn.Tool(lookup)],
                               delegation_tools=[]) as hub:
            for prompt in ("What is the capital of France? Look it up.", "Thank you. Say it in one word."):
                await hub.run(prompt)
        await model.aclose()

    asyncio.run(main())
    assert [(turn, step) for turn, step, _, _ in seen] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all(len(lines) == 1 for _, _, lines, _ in seen), seen  # forced and "none": one completion each
    prompts = [lines[0] for _, _, lines, _ in seen]
    for (before, _, _), (prompt, reused, evaluated) in zip(prompts, prompts[1:]):
        assert reused >= before - 3, prompts  # the previous prompt, but where its end meets the new text
        assert evaluated < prompt // 3, prompts
    # llama-cpp-python says the same: its prefix match covers what the launcher counted
    for (_, _, lines, hits) in seen[1:]:
        assert hits and hits[-1] >= lines[0][1] - 1, seen


def test_a_server_started_from_python_ends_with_the_process_that_started_it(tmp_path):
    """A notebook kernel restarted (SIGKILL) must not leave its 1-2 GB model server behind: the server
    reads its standard input, a pipe only its parent holds, and stops when it closes."""
    code = ("import sys, time\n"
            "from toh_nb.serve.model import start_model_server\n"
            "server = start_model_server(timeout=300)\n"
            "print(server.pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
    finally:
        parent.send_signal(signal.SIGKILL)  # no atexit, no finally: what a kernel restart does
        parent.wait()
        parent.stdout.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.2)
    outlived = alive(pid)
    if outlived:
        os.kill(pid, signal.SIGKILL)
    assert not outlived, f"serve-model (pid {pid}) outlived the process that started it by 60 s"
