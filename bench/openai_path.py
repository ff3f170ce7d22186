"""The real-model path: toh_nb's overhead over the raw ``openai`` client doing the same HTTP requests.

One hub run against a local OpenAI-compatible server (``tests/models/chat_server.py``, in its own
process so its threads do not share this process's GIL): the root's first completion asks for ``--n``
``subagent`` calls (pool of N, so the N children call the server concurrently), each child answers in
one completion, the root answers from their results: N + 2 requests. The *raw* run replays the very
request bodies the server received, with the same dependency shape (1, then N at once with
``asyncio.gather``, then 1), through one ``openai.AsyncOpenAI`` client.

Figures: ``openai_path`` (``seconds`` toh_nb, ``floor_seconds`` the raw client, ``overhead`` =
toh_nb / raw − 1; issue 18.6 wants ≤ 10 %), ``connections`` (TCP connections the server accepted
during each run: pooled and reused means at most N, not one per request), ``requests``, and
``bodies_identical`` (the raw client sent byte-for-byte the same JSON bodies). Runs alternate
toh_nb / raw ``--repeat`` times (default 5) and keep the best of each.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import _common as c

SERVER = r"""
import json, sys, threading
sys.path.insert(0, sys.argv[1])
from tests.models.chat_server import ChatServer, text, tool_calls
n = int(sys.argv[2])

def respond(body):
    last = body["messages"][-1]
    if last["role"] == "tool":
        return text("all children answered")
    if last["content"] == "fan out":
        return tool_calls([("call_%d" % i, "subagent", {"description": "child %d" % i, "prompt": "part %d" % i})
                           for i in range(n)])
    return text("ok: " + last["content"])

# 100 clients connect at once: the stdlib default backlog of 5 would reset most of them (real servers
# listen with a backlog of hundreds)
import http.server
http.server.ThreadingHTTPServer.request_queue_size = 1024
server = ChatServer()
server.responder = respond
server.start()
httpd = server._httpd
connections = [0]
accept = httpd.process_request
def counted(request, address):
    connections[0] += 1
    return accept(request, address)
httpd.process_request = counted
print(server.url, flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "reset":
        with server._lock:
            server.requests.clear()
        connections[0] = 0
        print("ok", flush=True)
    elif command == "stats":
        with server._lock:
            bodies = [r.body for r in server.requests]
        print(json.dumps({"connections": connections[0], "bodies": bodies}), flush=True)
    else:
        break
server.stop()
"""


class Server:
    """The chat server in a child process, driven over its stdin/stdout (stopped by ``close``)."""

    def __init__(self, n: int) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVER, c.REPO, str(n)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.close()
            raise SystemExit(f"openai_path: the chat server did not start (said {self.url!r})")

    def ask(self, command: str) -> str:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline()

    def stats(self) -> dict:
        return json.loads(self.ask("stats"))

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=10)
        except Exception:
            self.process.kill()
            self.process.wait()


async def engine(server: Server, n: int) -> dict:
    from toh_nb.hub import AsyncHub
    from toh_nb.models.openai_chat import OpenAIChatModel

    server.ask("reset")
    model = OpenAIChatModel("bench-model", base_url=server.url, api_key="sk-bench", max_tokens=None)
    t0 = c.now()
    async with AsyncHub(model, ids="sequential", max_parallel_tool_calls=n) as hub:
        result = await hub.run("fan out")
    seconds = c.now() - t0
    if result.text != "all children answered":
        raise SystemExit(f"openai_path: the root answered {result!r}")
    stats = server.stats()
    if len(stats["bodies"]) != n + 2:
        raise SystemExit(f"openai_path: the server saw {len(stats['bodies'])} requests, expected {n + 2}")
    return {"seconds": seconds, "connections": stats["connections"], "bodies": stats["bodies"]}


async def raw(server: Server, bodies: list[dict]) -> dict:
    import openai

    server.ask("reset")
    first, children, last = bodies[0], bodies[1:-1], bodies[-1]
    t0 = c.now()
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=server.url, max_retries=0)
    try:
        await client.chat.completions.create(**first)
        await asyncio.gather(*(client.chat.completions.create(**body) for body in children))
        await client.chat.completions.create(**last)
    finally:
        await client.close()
    seconds = c.now() - t0
    stats = server.stats()
    return {"seconds": seconds, "connections": stats["connections"], "bodies": stats["bodies"]}


def _order(bodies: list[dict]) -> list[dict]:
    """Root first and last, children in between (children arrive in any order)."""
    return [bodies[0]] + sorted(bodies[1:-1], key=lambda b: b["messages"][-1]["content"]) + [bodies[-1]]


async def main() -> None:
    p = c.parser(__doc__.splitlines()[0], [100])
    p.set_defaults(repeat=5)
    args = p.parse_args()
    try:
        import openai  # noqa: F401
    except ImportError:
        c.skipped("openai_path", "the openai package is not installed (pip install 'toh-nb[openai]')", args.json)
        return
    for n in args.n:
        server = Server(n)
        try:
            await engine(server, n)  # warm-up (imports, first connections)
            best_engine = best_raw = None
            for _ in range(max(1, args.repeat)):
                c.settle_gc()
                ours = await engine(server, n)
                bodies = _order(ours["bodies"])
                c.settle_gc()
                theirs = await raw(server, bodies)
                if best_engine is None or ours["seconds"] < best_engine["seconds"]:
                    best_engine = ours
                if best_raw is None or theirs["seconds"] < best_raw["seconds"]:
                    best_raw = theirs
            same = _order(best_raw["bodies"]) == _order(best_engine["bodies"])
        finally:
            server.close()
        seconds, base = best_engine["seconds"], best_raw["seconds"]
        fig = c.figure("openai_path", n, seconds, base, ops=n + 2, overhead=round(seconds / base - 1, 4),
                       target_overhead=0.10, meets_target=seconds / base - 1 <= 0.10, requests=n + 2,
                       connections=best_engine["connections"], floor_connections=best_raw["connections"],
                       bodies_identical=same)
        if args.json:
            c.emit(fig, True)
        else:
            print(f"{'openai_path':<28} n={n:<6} toh_nb {seconds:.3f} s  raw openai {base:.3f} s  overhead "
                  f"{fig['overhead']:+.1%} (target ≤ +10%: {'met' if fig['meets_target'] else 'MISSED'})  | "
                  f"{n + 2} requests on {fig['connections']} connections (raw: {fig['floor_connections']})  | "
                  f"bodies identical: {same}  | peak {fig['peak_rss_mb']} MB", flush=True)


if __name__ == "__main__":
    c.run_main(main)
