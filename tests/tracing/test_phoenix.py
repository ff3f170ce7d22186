"""A real trace backend: Arize Phoenix (``$TOH_NB_PHOENIX``, else ``.ci-agents/phoenix``), offline on 127.0.0.1.

Slow (Phoenix needs 30-40 s to start on a fresh database); skipped when Phoenix or the OTLP/HTTP
exporter is absent. Spans go over OTLP/HTTP; they are read back with Phoenix's own client (run by
Phoenix's interpreter) and must form the delegation tree with the parents the SDK gave them.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

import toh_nb as tn

from ..real_parts import PHOENIX as PHOENIX_VENV

from .conftest import delegate, say, script

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

PHOENIX = pathlib.Path(PHOENIX_VENV)
READ_BACK = """
import json, sys
from phoenix.client import Client
frame = Client(base_url=sys.argv[1]).spans.get_spans_dataframe(project_identifier=sys.argv[2])
rows = [{"name": r["name"], "span_id": r["context.span_id"], "parent_id": r["parent_id"],
         "kind": r.get("span_kind")} for _, r in frame.iterrows()]
print(json.dumps(rows))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def phoenix(tmp_path):
    exe = PHOENIX / "bin" / "phoenix"
    if not exe.exists():
        pytest.skip(f"Arize Phoenix is not installed at {PHOENIX}")
    port, grpc = _free_port(), _free_port()
    env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc),
           "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix")}
    process = subprocess.Popen([str(exe), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"phoenix serve did not come up on {url} (exit {process.poll()})")
                time.sleep(1)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_a_delegation_tree_read_back_from_phoenix(phoenix):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"openinference.project.name": "toh-nb-test"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{phoenix}/v1/traces")))
    model = script({"root": [delegate("c1", "kid"), say("done")], "kid": [delegate("c2", "grandkid"), say("k")],
                    "grandkid": [say("g")]})
    with tn.Hub(model, ids="sequential", tracing=provider) as hub:
        hub.run("go")
    provider.force_flush()
    provider.shutdown()
    rows: list = []
    deadline = time.monotonic() + 60
    while len(rows) < 9 and time.monotonic() < deadline:
        out = subprocess.run([str(PHOENIX / "bin" / "python"), "-c", READ_BACK, phoenix, "toh-nb-test"],
                             capture_output=True, text=True, timeout=120)
        rows = json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else []
        time.sleep(1)
    by_id = {row["span_id"]: row for row in rows}
    parent_name = {row["name"]: (by_id[row["parent_id"]]["name"] if row["parent_id"] in by_id else None)
                   for row in rows if row["name"].startswith("invoke_agent")}
    assert parent_name == {"invoke_agent root": None, "invoke_agent kid": "execute_tool subagent",
                           "invoke_agent grandkid": "execute_tool subagent"}
    assert sorted(row["name"] for row in rows) == sorted(
        ["invoke_agent root", "chat scripted", "execute_tool subagent", "chat scripted",
         "invoke_agent kid", "chat scripted", "execute_tool subagent", "chat scripted",
         "invoke_agent grandkid", "chat scripted"])
    kinds = {row["name"].split(" ")[0]: row["kind"] for row in rows}
    assert kinds == {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}
