"""``python -m toh_nb acp``'s server (``toh_nb.serve.acp.serve``) with a scripted root model, for the tests
of the MCP servers an ACP client sends: a prompt ``tools?`` answers the names of the tools the root is
offered; ``call <tool> <json arguments>`` calls that tool and answers ``result: <its text>``."""

import asyncio
import json
import os
import sys

# the toh_nb of this checkout (the ACP client's environment may not carry PYTHONPATH)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from toh_nb.serve.stdio import protocol_streams  # noqa: E402

output_fd = protocol_streams()  # first, as python -m toh_nb acp does

import toh_nb as tn  # noqa: E402
from toh_nb.serve.acp import serve  # noqa: E402


def answer(request):
    last = request.messages[-1]
    if last.role == "tool":
        return "result: " + last.text
    if last.text == "tools?":
        return " ".join(sorted(spec.name for spec in request.tools))
    if last.text.startswith("call "):
        _, name, arguments = last.text.split(" ", 2)
        return tn.ModelResponse(tool_calls=[tn.ToolCall(name, json.loads(arguments))])
    return "?"


asyncio.run(serve(model=tn.FunctionModel(answer), store=sys.argv[1] if len(sys.argv) > 1 else None,
                  output_fd=output_fd))
