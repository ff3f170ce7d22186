"""Prompt-cache reuse per model request on LocalModel (issue 32 item 6), with the tutorial's recipe.

The recipe forces ``subagent`` at the root's first step and asks for text with ``"none"`` afterwards.
For every request this prints the agent, its step, the prompt's tokens and how many of them the engine
found already in its KV cache (a prefix of the previous evaluation), i.e. how much was *not* evaluated
again. Run from the repository root: ``PYTHONPATH=. python bench/prompt_cache.py`` (needs the ``local`` extra;
SmolLM2-135M). Measured 2026-12 on the 2-core machine, under load: with the tools dropped at the
"none" steps (before) the root's second turn re-evaluated 1,924 of 1,927 prompt tokens (13.1 s) and
the whole session's prefill took 30.4 s; with the tools kept every request after the first reused
85-99 % of its prompt from the cache (at most 1.4 s of prefill each; 9.3 s for the session).
That change (LocalModel listing the tools at "none" steps) was reverted the same day: with the tools in
the prompt SmolLM2's forced delegation at the root ended max-tokens with no call (tests/real), so today's
LocalModel still drops the tools at a "none" step and this script shows the "before" figures.
"""

from __future__ import annotations

import time

import toh_nb as tn
from toh_nb.models import local_engine


def main() -> None:
    rows = []
    prefill = local_engine.Engine._prefill

    def measured(self, tokens, cancel):
        cached = self.llama.input_ids[: self.llama.n_tokens]
        same = 0
        for a, b in zip(cached, tokens):
            if a != b:
                break
            same += 1
        started = time.perf_counter()
        done = prefill(self, tokens, cancel)
        rows.append((len(tokens), min(same, len(tokens) - 1), time.perf_counter() - started))
        return done

    local_engine.Engine._prefill = measured
    model = tn.LocalModel(tool_choice=lambda r: "subagent" if r.depth == 0 and r.step == 1 else "none",
                          max_tokens=128)
    with tn.Hub(model=model, ids="sequential") as hub:
        result = hub.run("Find out what the capital of France is. Delegate it to a subagent.")
        second = hub.run("Thank you. Now say it in one word.")
    print(f"{'request':>7} {'prompt':>7} {'cached':>7} {'reused':>7} {'prefill s':>9}")
    for number, (size, same, seconds) in enumerate(rows, 1):
        print(f"{number:>7} {size:>7} {same:>7} {same / size:>7.0%} {seconds:>9.2f}")
    print("root:", result.stop_reason, repr(result.text[:60]), "|", second.stop_reason, repr(second.text[:60]))


if __name__ == "__main__":
    main()
