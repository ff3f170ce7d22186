"""A hand-written stdio MCP server (no SDK) for answers the SDK would never send.

It answers ``initialize`` and ``ping`` properly; ``--garble-list`` answers ``tools/list`` with a line that
is not JSON, else it lists one tool ``t`` (``--twice``: ``t``, ``t``, ``u``, ``t``, ``u``, names given
twice; ``--slow-pages``: a page every 0.3 s, each with a next cursor, without end); ``--slow-answer``
writes the first 1 MB of a 2 MB ``tools/call`` answer, then pauses 30 s; ``--garble-call`` answers every ``tools/call`` with such a line, else with the text ``ok <tool>``.
The garbled line is :data:`GARBLED` (cut short).
"""

import json
import sys
import time

GARBLED = '{"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": "cut'


def answer(request_id, result) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            answer(request_id, {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                                "serverInfo": {"name": "raw", "version": "1"}})
        elif method == "tools/list" and "--slow-pages" in sys.argv:  # a page every 0.3 s, never the last
            cursor = int((message.get("params") or {}).get("cursor") or 0)
            time.sleep(0.3)
            answer(request_id, {"tools": [{"name": f"t{cursor}", "inputSchema": {"type": "object"}}],
                                "nextCursor": str(cursor + 1)})
        elif method == "tools/list" and "--garble-list" not in sys.argv:
            names = ["t", "t", "u", "t", "u"] if "--twice" in sys.argv else ["t"]
            answer(request_id, {"tools": [{"name": name, "description": f"{name} number {i}",
                                           "inputSchema": {"type": "object"}} for i, name in enumerate(names)]})
        elif method == "tools/call" and "--slow-answer" in sys.argv:  # 1 MB of the answer, then a pause
            line = json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "result": {"content": [{"type": "text", "text": "x" * 2_000_000}]}}) + "\n"
            sys.stdout.write(line[:1_000_000])
            sys.stdout.flush()
            time.sleep(30)
            sys.stdout.write(line[1_000_000:])
            sys.stdout.flush()
        elif method == "tools/call" and "--garble-call" not in sys.argv:
            answer(request_id, {"content": [{"type": "text", "text": f"ok {message['params']['name']}"}]})
        elif method in ("tools/list", "tools/call"):
            sys.stdout.write(GARBLED + "\n")
            sys.stdout.flush()
        else:
            answer(request_id, {})


if __name__ == "__main__":
    main()
