"""The memory of ``python -m toh_nb serve-model`` while its prompt cache fills (issue 32.6 follow-up).

The launcher keeps saved model states so an agent's next step does not evaluate its prompt again
(``--prompt-cache-mb``). This sends ``--requests`` completions with distinct prompts (each ~1,200 tokens,
as an agent's request with toh_nb's tool list is), reads the server's resident memory (``VmRSS``) and
its peak (``VmHWM``) from ``/proc`` after each, and prints them: the peak must stay near the model's
own memory plus the cache budget, whatever the number of prompts.

Run from the repository root (needs the ``local`` extra and ``llama-cpp-python[server]``):
``nice -n 10 env PYTHONPATH=. python bench/server_memory.py --requests 12``
"""

from __future__ import annotations

import argparse
import json
import urllib.request

from toh_nb.serve.model import PROMPT_CACHE_MB, start_model_server

import _common as c

#: a long shared preamble (a system prompt's size) and a distinct ending per request
PREAMBLE = " ".join(f"Rule {i}: answer briefly and cite the step you took." for i in range(120))


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    return c.proc_status_kb("VmRSS", pid) / 1024, c.proc_status_kb("VmHWM", pid) / 1024


def complete(url: str, prompt: str) -> None:
    body = json.dumps({"messages": [{"role": "system", "content": PREAMBLE}, {"role": "user", "content": prompt}],
                       "max_tokens": 4, "temperature": 0}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        json.load(response)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--prompt-cache-mb", type=int, default=PROMPT_CACHE_MB)
    args = parser.parse_args()
    with start_model_server(prompt_cache_mb=args.prompt_cache_mb) as server:
        rss, peak = memory_mb(server.pid)
        print(f"prompt cache {args.prompt_cache_mb} MB; started: RSS {rss:,.0f} MB, peak {peak:,.0f} MB", flush=True)
        for index in range(args.requests):
            complete(server.url, f"Request {index}: name {index + 2} colours, one per line.")
            rss, peak = memory_mb(server.pid)
            print(f"after request {index + 1:2}: RSS {rss:,.0f} MB, peak {peak:,.0f} MB", flush=True)


if __name__ == "__main__":
    main()
