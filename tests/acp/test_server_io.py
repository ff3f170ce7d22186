"""The served agent's stdio (``toh_nb.serve.stdio``): a bad line gets its JSON-RPC error and the server
serves on; stdout may be a pipe, a regular file, /dev/null or closed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("acp", reason="needs the acp extra: pip install 'toh-nb[acp]'")

from toh_nb.serve import stdio as server_io

from .served import SERVER, WAIT, Served, text

pytestmark = pytest.mark.slow


def error(code: int, message: str, request_id=None, **extra) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, **extra}}


def assert_serves(server: Served, cwd: str) -> None:
    """After whatever came before: initialize, a new session and a whole prompt are answered."""
    assert server.initialize()["agentInfo"]["name"] == "toh_nb"
    session_id = server.new_session(cwd)
    assert server.prompt(session_id, text("Plan a garden"))["result"] == {"stopReason": "end_turn"}


BAD_LINES = [
    ("[1,2,3]", error(-32600, "Invalid request: a JSON-RPC message is an object, got an array")),
    ("[]", error(-32600, "Invalid request: a JSON-RPC message is an object, got an array")),
    ("42", error(-32600, "Invalid request: a JSON-RPC message is an object, got a number")),
    ("-1.5e3", error(-32600, "Invalid request: a JSON-RPC message is an object, got a number")),
    ('"s"', error(-32600, "Invalid request: a JSON-RPC message is an object, got a string")),
    ("true", error(-32600, "Invalid request: a JSON-RPC message is an object, got a boolean")),
    ("null", error(-32600, "Invalid request: a JSON-RPC message is an object, got null")),
    ('{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{"protocolVersion":1}}',
     error(-32600, 'Invalid request: "id" must be a string, an integer or null')),
    ('{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}',
     error(-32600, 'Invalid request: "id" must be a string, an integer or null')),
    ('{"jsonrpc":"1.0","id":7,"method":"initialize","params":{"protocolVersion":1}}',
     error(-32600, 'Invalid request: "jsonrpc" must be "2.0"', 7)),
    ('{"id":"a","method":"initialize","params":{"protocolVersion":1}}',
     error(-32600, 'Invalid request: "jsonrpc" must be "2.0"', "a")),
    ('{"jsonrpc":"2.0","id":8,"method":5}', error(-32600, 'Invalid request: "method" must be a string', 8)),
    ('{"jsonrpc":"2.0","method":["session/cancel"]}', error(-32600, 'Invalid request: "method" must be a string')),
    ('{"jsonrpc":"2.0","id":9}',
     error(-32600, 'Invalid request: a message needs a "method" (or an "id" with a "result" or "error")', 9)),
    ("{}", error(-32600, 'Invalid request: "jsonrpc" must be "2.0"')),
    ('{"jsonrpc":"2.0","id":10,"method":"initialize","params":[1]}',
     error(-32602, 'Invalid params: "params" must be an object', 10)),
    ('{"jsonrpc":"2.0","id":11,"method":"session/prompt","params":"x"}',
     error(-32602, 'Invalid params: "params" must be an object', 11)),
]


def test_every_bad_line_gets_its_error_and_the_server_serves_on(tmp_path):
    with Served("--latency", "0") as server:
        for line, expected in BAD_LINES:
            server.write(line)
            assert server.next() == expected, line
        assert_serves(server, str(tmp_path))
    assert server.process.returncode == 0 and "Traceback" not in server.err()


@pytest.mark.parametrize("line", [b"{bad", b"{\"jsonrpc\": \"2.0\", \"id\": 1,", b"\xff\xfe{}", b"nul",
                                  b"[" * 100_000 + b"]" * 100_000, b'{"a": NaN'])
def test_malformed_json_is_a_parse_error_with_id_null(tmp_path, line):
    with Served("--latency", "0") as server:
        server.write(line)
        answer = server.next()
        assert answer["id"] is None and answer["error"]["code"] == -32700
        assert answer["error"]["message"] == "Parse error: the line is not valid JSON"
        assert_serves(server, str(tmp_path))
    assert server.process.returncode == 0


def test_a_notification_with_bad_params_is_not_answered_and_the_server_serves_on(tmp_path):
    with Served("--latency", "0") as server:
        server.write('{"jsonrpc":"2.0","method":"session/cancel","params":[1]}',
                     '{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":5}}',
                     '{"jsonrpc":"2.0","method":"session/cancel"}',
                     '{"jsonrpc":"2.0","method":"no/such/notification","params":{}}')
        assert_serves(server, str(tmp_path))
        assert server.notifications and all(n["method"] == "session/update" for n in server.notifications)
    assert server.process.returncode == 0


def test_params_of_the_wrong_shape_are_invalid_params_naming_the_field(tmp_path):
    with Served("--latency", "0") as server:
        answer = server.call("session/new", {"cwd": 5, "mcpServers": []})["error"]
        assert (answer["code"], answer["message"]) == (-32602, "Invalid params: cwd: Input should be a valid string")
        answer = server.call("session/new", {"mcpServers": []})["error"]
        assert (answer["code"], answer["message"]) == (-32602, "Invalid params: cwd: Field required")
        answer = server.call("session/prompt", {"sessionId": 5, "prompt": [text("hi")]})["error"]
        assert (answer["code"], answer["message"]) == (-32602, "Invalid params: sessionId: Input should be a valid string")
        answer = server.call("session/prompt", {"sessionId": "toh-1", "prompt": [{"type": "text"}]})["error"]
        assert (answer["code"], answer["message"]) == (-32602, "Invalid params: prompt.0.text.text: Field required")
        answer = server.call("session/load", None)["error"]
        assert (answer["code"], answer["message"]) == (
            -32602, "Invalid params: params: Input should be a valid dictionary or instance of LoadSessionRequest")
        answer = server.call("no/such/method", {})["error"]
        assert answer == {"code": -32601, "message": "Method not found", "data": {"method": "no/such/method"}}
        assert_serves(server, str(tmp_path))
    assert server.process.returncode == 0


def test_input_ending_right_after_a_request_still_gets_its_answer(tmp_path):
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    done = subprocess.run([*SERVER, "--latency", "0"], input=(request + "\n[1]\n").encode(),
                          capture_output=True, timeout=WAIT)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert sorted(line["id"] is None for line in lines) == [False, True]
    assert next(line for line in lines if line["id"] == 1)["result"]["agentInfo"]["name"] == "toh_nb"


def _wait_for_lines(path, count: int) -> list[dict]:
    deadline = time.monotonic() + WAIT
    while True:
        lines = path.read_bytes().splitlines() if path.exists() else []
        if len(lines) >= count or time.monotonic() > deadline:
            return [json.loads(line) for line in lines]
        time.sleep(0.02)


def test_stdout_redirected_to_a_regular_file(tmp_path):
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as handle, Served("--latency", "0", stdout=handle) as server:
        server.send("initialize", {"protocolVersion": 1})
        server.write("[1]")
        server.send("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        answers = {line["id"]: line for line in _wait_for_lines(out, 3)}  # the error may come first
    assert server.process.returncode == 0, server.err()
    assert answers[1]["result"]["agentInfo"]["name"] == "toh_nb"
    assert answers[None]["error"]["code"] == -32600
    assert answers[2]["result"]["sessionId"].startswith("toh-")


def test_stdin_and_stdout_both_regular_files(tmp_path):
    requests = tmp_path / "in.jsonl"
    requests.write_text("\n".join([
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        "42",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path),
                                                                                     "mcpServers": []}})]))
    out = tmp_path / "out.jsonl"
    with open(requests, "rb") as stdin, open(out, "wb") as stdout:
        done = subprocess.run([*SERVER, "--latency", "0"], stdin=stdin, stdout=stdout,
                              stderr=subprocess.PIPE, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    answers = {line.get("id"): line for line in map(json.loads, out.read_bytes().splitlines())}
    assert answers[None]["error"]["code"] == -32600 and answers[1]["result"]["protocolVersion"] == 1
    assert answers[2]["result"]["sessionId"].startswith("toh-")


@pytest.mark.parametrize("stdout", ["devnull", "closed"])
def test_stdout_to_dev_null_or_closed_still_serves(tmp_path, stdout):
    """Answers go nowhere, but the server still runs every request (its log shows the session) and exits 0."""
    popen = {"stdout": subprocess.DEVNULL} if stdout == "devnull" else {"stdout": None, "preexec_fn": lambda: os.close(1)}
    with Served("--latency", "0", "--verbose", "--store", str(tmp_path / "store"), **popen) as server:
        server.write("[1,2,3]", "null", "{bad")
        server.send("initialize", {"protocolVersion": 1})
        server.send("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        deadline = time.monotonic() + WAIT
        while "session toh-" not in server.err() and time.monotonic() < deadline:
            time.sleep(0.02)
    assert server.process.returncode == 0, server.err()
    assert "Traceback" not in server.err()
    assert [line.split()[:2] for line in server.err().splitlines() if "opened" in line] == [["toh_nb", "acp:"]]
    (session,) = os.listdir(tmp_path / "store")
    assert session.startswith("toh-")


def test_stray_writes_to_fd_1_never_reach_the_protocol_stream():
    script = ("import os; from toh_nb.serve.stdio import protocol_streams; fd = protocol_streams(); "
              "print('stray print'); os.write(1, b'c-level write\\n'); os.write(fd, b'protocol\\n')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT)
    assert done.stdout == "protocol\n"
    assert done.stderr == "stray print\nc-level write\n"


def test_a_closed_stdout_is_no_protocol_stream_and_fd_1_is_not_reused():
    script = ("import os, sys; from toh_nb.serve.stdio import protocol_streams; fd = protocol_streams(); "
              "print('stray', fd); f = open(os.devnull); print('next fd', f.fileno())")
    done = subprocess.run([sys.executable, "-c", script], stdout=None, stderr=subprocess.PIPE, text=True,
                          timeout=WAIT, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and done.stderr.splitlines()[0] == "stray None"
    assert int(done.stderr.splitlines()[1].split()[-1]) > 2


def test_a_line_over_the_limit_is_refused_and_the_next_one_read():
    async def main():
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        transport = await server_io.ServerTransport.open(in_read, out_write, limit=64)
        os.write(in_write, b'{"jsonrpc":"2.0","method":"x","params":{"pad":"' + b"y" * 200 + b'"}}\n'
                           b'{"jsonrpc":"2.0","id":3,"method":"initialize"}\n')
        os.close(in_write)
        message = await asyncio.wait_for(transport.receive(), WAIT)
        await transport.send({"jsonrpc": "2.0", "id": 3, "result": None})
        end = await asyncio.wait_for(transport.receive(), WAIT)  # end of input: nothing left unanswered
        await transport.close()
        os.close(out_write)
        with os.fdopen(out_read, "rb") as answers:
            return message, end, answers.read()

    message, end, answers = asyncio.run(main())
    assert message == {"jsonrpc": "2.0", "id": 3, "method": "initialize"}
    assert [json.loads(line) for line in answers.splitlines()] == [
        error(-32600, "Invalid request: the line exceeds 64 bytes"), {"jsonrpc": "2.0", "id": 3, "result": None}]
    assert end is None


@pytest.mark.parametrize("stdin", ["devnull", "closed"])
def test_stdin_from_dev_null_or_closed_is_end_of_input(tmp_path, stdin):
    popen = {"stdin": subprocess.DEVNULL} if stdin == "devnull" else {"stdin": None, "preexec_fn": lambda: os.close(0)}
    done = subprocess.run([*SERVER, "--store", str(tmp_path / "store")], capture_output=True, timeout=WAIT, **popen)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
