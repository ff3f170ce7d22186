"""Command line: ``python -m toh_nb demo`` (also the ``toh-nb`` console script).

``demo`` runs a delegation tree on the offline :class:`~toh_nb.models.demo.DemoModel` with sequential
ids: the root agent fans out three parallel children (one of which delegates again), collects a
background review job, and the user then starts a continuable ``editor`` child, sends it a follow-up
and waits for it. It prints the final answer, the whole agent tree (every agent and job, as the widget's
text snapshot shows it), what ``list_agents`` returns to the root (only continuable children appear there),
and the agents and jobs tables as a notebook displays them. No network, no key.

``acp`` serves a hub over stdio as an Agent Client Protocol agent (``toh_nb.serve.acp``); ``mcp`` serves
one as an MCP server whose tools are the delegation surface (``toh_nb.serve.mcp``).

``serve-model`` runs llama-cpp-python's OpenAI-compatible server the safe way for toh_nb's
``profile="llama.cpp"`` (``toh_nb.serve.model``: no AMX extra buffers, no HTML escaping, bounded
generations); its own options are listed by ``python -m toh_nb serve-model --help``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

DEFAULT_TOPIC = "Plan a small vegetable garden for a sunny balcony"
AGENT_COLUMNS = ["id", "parent", "depth", "label", "mode", "status", "turns", "stop_reason"]


def _section(title: str) -> str:
    return f"== {title} =="


def run_demo(topic: str = DEFAULT_TOPIC, latency: float = 0.02, out=None) -> int:
    import toh_nb as tn
    from toh_nb.notebook.treeview import tree_text

    out = out or sys.stdout

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    with tn.Hub(tn.DemoModel(latency=latency), ids="sequential") as hub:
        # the demo prints what happened, failures included (check=False: a failed turn is shown, not raised)
        result = hub.run(topic, check=False)
        editor = hub.start(f'Edit the summary about "{topic}" for a newsletter.', label="editor")
        first_edit = editor.wait(timeout=30, check=False)
        editor.send("Make it two sentences shorter.")
        second_edit = editor.wait(timeout=30, check=False)

        say(_section("Final answer"))
        say(result.text)
        say()
        say(_section(f"Continuable child {editor.id} (editor)"))
        say(f"first turn: {first_edit}")
        say(f"follow-up:  {second_edit}")
        say()
        say(_section("Agent tree"))
        say(tree_text(hub.graph().rows))
        say()
        say(_section("list_agents descendants (what the root's model sees: continuable children only)"))
        say(str(hub.list_agents("descendants")))
        say()
        # the tables as a notebook shows them (short ids, clock times, durations), not raw pandas values
        say(_section("Agents"))
        say(repr(hub.agents()[AGENT_COLUMNS]))
        say()
        say(_section("Jobs"))
        say(repr(hub.jobs()))
    return 0 if result.ok else 1


def _served_hub_options(command: argparse.ArgumentParser, store_help: str) -> None:
    """The options of a served hub (``acp`` and ``mcp``): its store, model and depth limit."""
    command.add_argument("--store", default=None, help=store_help)
    command.add_argument("--model", default="demo",
                         help="'demo' (offline DemoModel), 'local[:PATH.gguf]', 'openai:NAME[@URL]', "
                              "'llamacpp:NAME@URL', 'vllm:NAME@URL', 'ollama:NAME[@URL]', or a bare name: an "
                              "OpenAI-compatible model (default: %(default)s)")
    command.add_argument("--base-url", default=None,
                         help="base URL of the OpenAI-compatible server when --model names none (or OPENAI_BASE_URL)")
    command.add_argument("--latency", type=float, default=0.02, help="demo model: seconds per call (default: %(default)s)")
    command.add_argument("--max-depth", type=int, default=3, help="delegation depth limit (default: %(default)s)")
    command.add_argument("--verbose", action="store_true", help="log sessions to stderr")


def main(argv: Sequence[str] | None = None) -> int:
    from .version import __version__

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-model"]:  # its own parser: options after -- go to llama_cpp.server
        from .serve.model import main as serve_model

        return serve_model(argv[1:])

    parser = argparse.ArgumentParser(prog="toh-nb", description="toh_nb: an LLM subagent system for Jupyter.")
    parser.add_argument("--version", action="version", version=f"toh_nb {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run a delegation tree on the offline DemoModel and print it")
    demo.add_argument("--topic", default=DEFAULT_TOPIC, help="what the root agent is asked (default: %(default)s)")
    demo.add_argument("--latency", type=float, default=0.02,
                      help="simulated seconds per model call (default: %(default)s)")
    acp = commands.add_parser("acp", help="serve a toh_nb hub over stdio as an ACP agent (needs toh-nb[acp])")
    _served_hub_options(acp, "directory of session logs; enables session/load (default: memory)")
    mcp = commands.add_parser("mcp", help="serve a toh_nb hub as an MCP server of delegation tools (needs toh-nb[mcp])")
    _served_hub_options(mcp, "directory of the tree's logs, which tn.Hub(store=DIR) opens (default: memory)")
    mcp.add_argument("--http", type=int, default=None, metavar="PORT",
                     help="serve streamable HTTP on 127.0.0.1:PORT at /mcp instead of stdio")
    commands.add_parser("serve-model", add_help=False,
                        help="serve a GGUF model with llama-cpp-python's server, the safe way (see serve-model --help)")
    args = parser.parse_args(argv)
    if args.command in ("acp", "mcp"):
        if args.latency < 0:
            parser.error("--latency must be >= 0")
        if args.max_depth < 0:
            parser.error("--max-depth must be >= 0")
        if args.command == "mcp":
            if args.http is not None and not 0 < args.http < 65536:
                parser.error("--http must be a port from 1 to 65535")
            from .serve.mcp import main as serve_mcp

            return serve_mcp(args)
        from .serve.acp import main as serve_acp

        return serve_acp(args)
    if args.command == "demo":
        if args.latency < 0:
            parser.error("--latency must be >= 0")
        if not args.topic.strip():
            parser.error("--topic must not be empty")
        return run_demo(args.topic, args.latency)
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
