"""Prompt-cache reuse per model request with a real small model (issue 32 item 6), before and after.

The tutorial's recipe forces ``subagent`` at the root's first step and asks for text with ``"none"``
everywhere else; the root then gets a second turn. For every model request this prints the agent, its
turn and step, the tool choice, the prompt's tokens and how many of them the backend found already in
its KV cache (``reused``: not evaluated again) and how many it evaluated.

Two variants run in the same process, one after the other, on the same backend:

- ``before``: a ``"none"`` request is sent without its tool list (what LocalModel did, and what
  llama-cpp-python's ``chatml-function-calling`` renders for ``tool_choice="none"``), so it shares only
  the chat template's first tokens with the forced request before it;
- ``after``: the tool list stays (today's LocalModel; ``serve-model``'s rendering of ``"none"``), so
  each request of an agent extends the previous one.

Backends: ``local`` (``tn.LocalModel``; the figures are its ``cache_log``) and ``server``
(``python -m toh_nb serve-model`` + ``OpenAIChatModel(profile="llama.cpp")``; the figures are the
launcher's ``serve-model cache:`` log lines, one per completion, summed per request). The KV cache holds
one sequence, so a child's request in between evicts part of its parent's prefix: on LocalModel the
root's step after its child's answer reuses what the two prompts share (the tool list opens both);
``serve-model`` also keeps saved states (``--prompt-cache-mb``; ``--prompt-cache-mb 0`` here to compare),
so the root's step after its child loads its own.

Run from the repository root (needs the ``local`` extra; a few minutes):
``nice -n 10 env PYTHONPATH=. python bench/prompt_cache.py --backend both``
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import time

import toh_nb as tn

FIRST = "Find out what the capital of France is. Delegate it to a subagent and wait for its answer."
SECOND = "Thank you. Now say it in one word."
MAX_TOKENS = 64


def delegate_first(request) -> str:
    return "subagent" if request.depth == 0 and request.step == 1 else "none"


class Measured:
    """Wraps the backend's model: strips the tools of ``"none"`` requests in the ``before`` variant and
    records one row per request: (agent, turn, step, choice, prompt, reused, evaluated, seconds)."""

    def __init__(self, backend: str, inner, variant: str, server=None) -> None:
        self.backend, self.inner, self.variant, self.server = backend, inner, variant, server
        self.rows: list[tuple] = []

    async def request(self, request):
        choice = delegate_first(request)
        if self.variant == "before" and choice == "none":
            request = dataclasses.replace(request, tools=[])
        offset = len(self.server.log_text()) if self.server is not None else 0
        started = time.perf_counter()
        response = await self.inner.request(request)
        seconds = time.perf_counter() - started
        if self.backend == "local":
            use = self.inner.cache_log[-1]
            prompt, reused = use.prompt_tokens, use.reused_tokens
        else:
            from toh_nb.serve.model import CACHE_LINE_PATTERN

            # one line per completion (a forced or "none" request makes one; llama-cpp-python's "auto" several)
            lines = [tuple(map(int, m.groups())) for m in re.finditer(CACHE_LINE_PATTERN,
                                                                       self.server.log_text()[offset:], re.M)]
            prompt, reused = sum(line[0] for line in lines), sum(line[1] for line in lines)
        self.rows.append((request.agent_id, request.turn, request.step, choice, prompt, reused, prompt - reused,
                          seconds))
        return response


def make(backend: str, server):
    if backend == "local":
        return tn.LocalModel(tool_choice=delegate_first, max_tokens=MAX_TOKENS)
    return tn.OpenAIChatModel("smollm2", base_url=server.url, profile="llama.cpp", tool_choice=delegate_first,
                              temperature=0.0, max_tokens=MAX_TOKENS, timeout=300.0, max_retries=0)


def evict(backend: str, model, server) -> None:
    """Start the next variant from a cache that holds none of this run's prompts."""
    if backend == "local":
        model.engine.llama.reset()
        return
    import json
    import urllib.request

    body = {"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 1}
    request = urllib.request.Request(f"{server.url}/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        response.read()


def run(backend: str, variant: str, server) -> tuple[list[tuple], list[str]]:
    measured = Measured(backend, make(backend, server), variant, server)
    with tn.Hub(model=tn.FunctionModel(measured.request), ids="sequential", max_depth=1,
                delegation_tools=[tn.SubagentTool(enable_run_in_background=False)]) as hub:
        answers = [hub.run(FIRST), hub.run(SECOND)]
    evict(backend, measured.inner, server)
    return measured.rows, [f"{a.stop_reason}: {a.text[:50]!r}" for a in answers]


def report(backend: str, variant: str, rows: list[tuple], answers: list[str]) -> None:
    print(f"\n{backend} / {variant}")
    print(f"{'agent':>8} {'turn':>4} {'step':>4} {'choice':>9} {'prompt':>6} {'reused':>6} {'evaluated':>9} "
          f"{'reuse':>6} {'s':>6}")
    for agent, turn, step, choice, prompt, reused, evaluated, seconds in rows:
        share = f"{reused / prompt:.0%}" if prompt else "-"
        print(f"{agent:>8} {turn:>4} {step:>4} {choice:>9} {prompt:>6} {reused:>6} {evaluated:>9} {share:>6} "
              f"{seconds:>6.2f}")
    evaluated = sum(r[6] for r in rows)
    later = [r for r in rows if r[0] == "root" and (r[1], r[2]) != (1, 1)]
    print(f"total: {sum(r[4] for r in rows)} prompt tokens, {sum(r[5] for r in rows)} reused, {evaluated} "
          f"evaluated; root after its first request: {sum(r[6] for r in later)} evaluated of "
          f"{sum(r[4] for r in later)}; {sum(r[7] for r in rows):.1f} s of requests")
    print("answers:", " | ".join(answers))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("local", "server", "both"), default="local")
    parser.add_argument("--prompt-cache-mb", type=int, default=None,
                        help="serve-model's saved-state cache (default: the launcher's; 0: off)")
    args = parser.parse_args()
    backends = ("local", "server") if args.backend == "both" else (args.backend,)
    for backend in backends:
        if backend == "local":
            for variant in ("before", "after"):
                report(backend, variant, *run(backend, variant, None))
            continue
        from toh_nb.serve.model import start_model_server

        options = {} if args.prompt_cache_mb is None else {"prompt_cache_mb": args.prompt_cache_mb}
        with start_model_server(**options) as server:
            for variant in ("before", "after"):
                report(backend, variant, *run(backend, variant, server))


if __name__ == "__main__":
    main()
