"""``python -m toh_nb serve-model``: llama-cpp-python's OpenAI server started the safe way for toh_nb.

Why a launcher of our own: plain ``python -m llama_cpp.server`` (and ``Llama.create_chat_completion``
in a notebook) crashed with a segmentation fault (exit 139) on this project's machine, a CPU with
Intel AMX: llama.cpp's AMX matmul path (an "extra buffer type") fails on the bundled SmolLM2 Q4_1
GGUF (llama-cpp-python 0.3.36), and the server has no option to turn it off. This launcher runs the
same server in the same process with these changes, each undoable only here (in its own process — a
library never patches the user's):

- models are loaded without extra buffer types (``local_engine.extra_buffers_off``, as LocalModel does);
- chat templates are rendered without HTML autoescaping, so the model reads ``I'm`` and not ``I&#39;m``
  in earlier turns (the ``chatml-function-calling`` template escapes them, and small models parrot it);
- every generation is bounded: a completion asked with no ``max_tokens`` (llama-cpp-python's
  ``"auto"`` tool mode asks so for the tool arguments and the text) gets ``--max-tokens-cap`` (1024);
- a ``tool_choice="none"`` request that offers tools is rendered with its tool list and the
  ``message:`` prefixes, as the template renders a forced or ``"auto"`` request (llama-cpp-python's
  ``chatml-function-calling`` drops both for ``"none"``), and generates its text after ``message:``
  under LocalModel's markup-free text grammar: each request of an agent then extends the previous one
  as an exact prefix and the server's KV cache is reused across a ``"none"`` step
  (``bench/prompt_cache.py --backend server``: the figures);
- each completion prints how much of its prompt the cache held (``serve-model cache: prompt N tokens,
  R reused, E evaluated``) to the server's log;
- llama.cpp's OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless set), as LocalModel's
  do: with spinning threads the server made 0.5-2 tokens/s on the shared two-core machine while
  LocalModel made ~15 (measured side by side);
- the prompt cache is :class:`~toh_nb.models.saved_states.SavedStates` (``--prompt-cache-mb``, 1024 MB;
  0: off): the server's context holds one sequence, so a child's request evicts its parent's prompt; with
  the cache the parent's next step loads its saved state instead of evaluating its prompt again. Its
  budget counts whole states: llama-cpp-python's own ``--cache`` counts only their key/value bytes, and a
  server using it grew by ~360 MB per distinct prompt until the OOM killer ended it.

And the settings toh_nb's ``profile="llama.cpp"`` is measured with: ``--chat_format
chatml-function-calling`` (the format that gives small GGUF models tool calls), ``--logits_all False``
(the server's default keeps the logits of every prompt token, ~190 KB a token with SmolLM2, in the
model and in each saved state; only ``logprobs`` need them: pass ``-- --logits_all True`` for those), 127.0.0.1,
``--n_ctx 8192``, ``--interrupt_requests False`` (with it, a second request cut a running stream short
with no finish_reason), the bundled SmolLM2 GGUF unless ``--model`` names another. Any other
``llama_cpp.server`` option is passed through unchanged after ``--``::

    python -m toh_nb serve-model --port 8000                      # bundled SmolLM2-135M-Instruct
    python -m toh_nb serve-model --model qwen2.5-1.5b-instruct-q4_k_m.gguf -- --n_batch 256

From Python (a notebook, a test, a benchmark), :func:`start_model_server` starts it as a child process
bound to 127.0.0.1 on a free port, waits until it answers and returns a handle whose ``url`` is the
``base_url`` of ``tn.OpenAIChatModel(..., profile="llama.cpp")``; ``stop()`` (or the ``with`` block)
ends exactly that process, and it ends by itself when the process that started it goes, however it
goes (``--exit-with-stdin``: it reads a pipe only its parent holds).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.errors import ModelError, UsageError
from ..models.saved_states import SavedStates, common_prefix

#: a generation asked with no limit gets this many tokens at most
MAX_TOKENS_CAP = 1024
#: megabytes of saved model states (llama-cpp-python's RAM prompt cache); 0 turns it off
PROMPT_CACHE_MB = 1024
#: the llama-cpp-python chat format the launcher serves (tool calls for small GGUF models)
FUNCTION_CALLING = "chatml-function-calling"
START_TIMEOUT = 120.0


def default_threads() -> int:
    return min(os.cpu_count() or 1, 8)


def server_argv(model: str, *, host: str = "127.0.0.1", port: int = 8000, n_ctx: int = 8192,
                n_threads: int | None = None, seed: int = 0, extra: Sequence[str] = ()) -> list[str]:
    """The ``llama_cpp.server`` arguments of the safe settings (see the module docstring)."""
    # no --cache: the prompt cache is safe_server_settings' SavedStates, whose budget counts whole states;
    # --logits_all False: a state then holds the logits of one batch, not of every prompt token (logprobs,
    # which need them, are refused unless `-- --logits_all True` is passed)
    return ["--model", str(model), "--chat_format", FUNCTION_CALLING, "--host", host, "--port", str(port),
            "--n_ctx", str(n_ctx), "--n_threads", str(n_threads or default_threads()), "--seed", str(seed),
            "--interrupt_requests", "False", "--logits_all", "False", *extra]


def capped(max_tokens: Any, cap: int) -> Any:
    """``max_tokens`` of one completion under the launcher: no limit (None, 0 or less) becomes ``cap``."""
    return cap if max_tokens is None or (isinstance(max_tokens, int) and max_tokens <= 0) else max_tokens


@contextlib.contextmanager
def safe_server_settings(cap: int = MAX_TOKENS_CAP, cache_bytes: int = 0) -> Iterator[None]:
    """Inside this block, in this process: no extra buffer types, no HTML autoescape in chat templates,
    every completion bounded by ``cap``, ``"none"`` requests keep their tool list (:func:`none_keeps_tools`),
    and a model's first completion gives it a :class:`~toh_nb.models.saved_states.SavedStates` prompt
    cache of ``cache_bytes`` (0: none). For the launcher's own process only."""
    import llama_cpp
    from llama_cpp import llama_chat_format

    from ..models.local_engine import extra_buffers_off

    environment = llama_chat_format.ImmutableSandboxedEnvironment

    class Unescaped(environment):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["autoescape"] = False
            super().__init__(*args, **kwargs)

    create_completion = llama_cpp.Llama.create_completion

    @functools.wraps(create_completion)
    def bounded(self: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["max_tokens"] = capped(kwargs.get("max_tokens"), cap)
        if cache_bytes and not isinstance(self.cache, SavedStates):
            self.set_cache(SavedStates(cache_bytes))
        report_cache_use(self, kwargs["prompt"] if "prompt" in kwargs else args[0] if args else None)
        return create_completion(self, *args, **kwargs)

    registry = llama_chat_format.LlamaChatCompletionHandlerRegistry()
    function_calling = registry.get_chat_completion_handler_by_name(FUNCTION_CALLING)
    llama_chat_format.ImmutableSandboxedEnvironment = Unescaped
    llama_cpp.Llama.create_completion = bounded
    registry.register_chat_completion_handler(FUNCTION_CALLING, none_keeps_tools(function_calling), overwrite=True)
    try:
        with extra_buffers_off():
            yield
    finally:
        llama_chat_format.ImmutableSandboxedEnvironment = environment
        llama_cpp.Llama.create_completion = create_completion
        registry.register_chat_completion_handler(FUNCTION_CALLING, function_calling, overwrite=True)


#: the line the launcher prints for every completion (to its log): how much of the prompt the KV cache held
CACHE_LINE = "serve-model cache: prompt {prompt} tokens, {reused} reused, {evaluated} evaluated"
CACHE_LINE_PATTERN = r"^serve-model cache: prompt (\d+) tokens, (\d+) reused, (\d+) evaluated$"


def reused_tokens(cached: Sequence[int], tokens: Sequence[int]) -> int:
    """The tokens of a new prompt the KV cache holds: its common prefix with what was evaluated last,
    at most all but its last token (llama-cpp-python's ``Llama.generate`` evaluates that one again)."""
    return min(common_prefix(cached, tokens), max(len(tokens) - 1, 0))


def report_cache_use(llama: Any, prompt: Any) -> None:
    """Print :data:`CACHE_LINE` for a completion about to run on ``llama`` (the server's model).

    The cache is llama-cpp-python's public state: ``Llama.input_ids[:Llama.n_tokens]`` are the tokens
    whose keys and values the context holds; the prompt is tokenized as ``create_completion`` does."""
    try:
        tokens = list(prompt) if isinstance(prompt, list) else llama.tokenize(str(prompt).encode("utf-8"),
                                                                             special=True)
        reused = reused_tokens(llama.input_ids[: llama.n_tokens], tokens)
    except Exception:  # never fail a completion over a log line (a prompt of another shape, a stand-in)
        return
    saved = getattr(llama, "cache", None)  # a saved state with a longer prefix is loaded first
    if saved:
        try:
            reused = max(reused, reused_tokens(saved[tokens].input_ids.tolist(), tokens))
        except (KeyError, AttributeError, TypeError):
            pass
    print(CACHE_LINE.format(prompt=len(tokens), reused=reused, evaluated=len(tokens) - reused),
          file=sys.stderr, flush=True)


class _Prompt(Exception):
    """Carries the prompt a chat handler was about to complete (see :func:`none_keeps_tools`)."""

    def __init__(self, prompt: Any) -> None:
        super().__init__("prompt captured")
        self.prompt = prompt


class _PromptOnly:
    """A ``Llama`` stand-in whose ``create_completion`` hands back its prompt instead of generating."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, prompt: Any, **kwargs: Any) -> Any:
        raise _Prompt(prompt)


#: what opens a text answer in ``chatml-function-calling`` once tools are listed
MESSAGE_OPEN = "message:\n"


def none_keeps_tools(handler: Any) -> Any:
    """``chatml-function-calling`` whose ``tool_choice="none"`` keeps the tool list in the prompt.

    Why: llama-cpp-python renders a ``"none"`` request without its functions block and without the
    ``message:`` prefix of earlier answers, so the request after a forced call shares only the system
    text with it and the server evaluates the whole prompt again (the tool list alone is ~1,700 tokens
    with toh_nb's tools). Here such a request is rendered the way the handler renders a call forced to
    the first tool (the handler itself renders it, so the text is the template's own), the call's
    opening ``functions.<name>:`` is replaced with ``message:``, and plain text is generated after it
    with llama-cpp-python's public chat-formatter handler, which stops at ``<|im_end|>`` as ``"none"``
    does, under LocalModel's markup-free text grammar (``local_grammar.text_grammar``: shown the call
    format in the system message, SmolLM2 otherwise answered ``<response>`` tags and call-shaped JSON).
    Requests with another ``tool_choice``, or without tools, go to the handler unchanged.
    """
    from llama_cpp import llama_chat_format

    def handler_keeping_tools(**kwargs: Any) -> Any:
        tools = kwargs.get("tools")
        if kwargs.get("tool_choice") != "none" or not tools:
            return handler(**kwargs)
        first = tools[0]["function"]["name"]
        forced = {**kwargs, "llama": _PromptOnly(kwargs["llama"]), "stream": False,
                  "tool_choice": {"type": "function", "function": {"name": first}}}
        try:
            handler(**forced)
        except _Prompt as captured:
            prompt = captured.prompt
        else:  # the handler generated without asking create_completion: keep its own "none"
            return handler(**kwargs)
        call_open = f"functions.{first}:\n"
        if not isinstance(prompt, str) or not prompt.endswith(call_open):
            return handler(**kwargs)
        text_prompt = prompt[: -len(call_open)] + MESSAGE_OPEN

        def formatter(**_: Any) -> Any:
            return llama_chat_format.ChatFormatterResponse(prompt=text_prompt, stop=["<|im_end|>"])

        if kwargs.get("grammar") is None and kwargs.get("response_format") is None:
            # shown the call format, SmolLM2 answered '<response>\n{ "arg1": "Paris", …': text without markup,
            # the grammar of LocalModel's "none" steps
            from llama_cpp import LlamaGrammar

            from ..models.local_grammar import text_grammar

            kwargs = {**kwargs, "grammar": LlamaGrammar.from_string(text_grammar(), verbose=False)}
        return llama_chat_format.chat_formatter_to_chat_completion_handler(formatter)(**kwargs)

    return handler_keeping_tools


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="toh-nb serve-model", description=(
        "Serve a GGUF model with llama-cpp-python's OpenAI-compatible server, with the settings toh_nb's "
        'profile="llama.cpp" is measured with (no AMX extra buffers, no HTML escaping, bounded generations). '
        "Arguments after -- go to llama_cpp.server unchanged."))
    p.add_argument("--model", default=None, help="path to a chat .gguf (default: the bundled SmolLM2-135M-Instruct)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--n-ctx", type=int, default=8192, help="context size in tokens (default: %(default)s)")
    p.add_argument("--n-threads", type=int, default=None, help="CPU threads (default: cores, at most 8)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")
    p.add_argument("--max-tokens-cap", type=int, default=MAX_TOKENS_CAP,
                   help="tokens of a completion asked with no limit (default: %(default)s)")
    p.add_argument("--exit-with-stdin", action="store_true",
                   help="stop when standard input closes (start_model_server's child ends with the process that "
                        "started it, even one killed with SIGKILL: a restarted kernel)")
    p.add_argument("--prompt-cache-mb", type=int, default=PROMPT_CACHE_MB,
                   help="megabytes of model states kept after each completion, so a prompt that extends an "
                        "earlier one (an agent's next step after a child's request) is not evaluated again; "
                        "0: off (default: %(default)s)")
    return p


#: seconds the server may take to shut down after its parent went before it is ended outright
PARENT_GONE_GRACE = 10.0


def exit_when_stdin_closes(grace: float = PARENT_GONE_GRACE) -> None:
    """Read standard input to its end (the parent holds the pipe's other end: it closes when the parent
    exits, however it exits), then stop this server: SIGTERM (uvicorn's graceful shutdown), and after
    ``grace`` seconds (a generation still running) exit outright."""
    try:  # the file descriptor, not sys.stdin: a daemon thread blocked in a buffered read aborts shutdown
        while os.read(0, 4096):
            pass
    except OSError:  # no usable stdin: treated as closed
        pass
    print("serve-model: standard input closed (the process that started it is gone); stopping",
          file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    os._exit(1)


def main(argv: Sequence[str]) -> int:
    """Run the server in this process until it is stopped (Ctrl-C, SIGTERM)."""
    argv = list(argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = parser().parse_args(argv)
    if args.max_tokens_cap < 1:
        parser().error("--max-tokens-cap must be >= 1")
    if args.prompt_cache_mb < 0:
        parser().error("--prompt-cache-mb must be >= 0")
    if args.exit_with_stdin:
        threading.Thread(target=exit_when_stdin_closes, name="serve-model stdin watch", daemon=True).start()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when llama.cpp loads: before the import
    try:
        import llama_cpp.server  # noqa: F401  (the server extra: fastapi, uvicorn, sse-starlette)
    except ImportError as exc:
        raise UsageError(f"serve-model needs llama-cpp-python with its server extra ({exc}): "
                         "pip install 'toh-nb[local]' 'llama-cpp-python[server]'") from None
    from ..models.local_engine import default_model_path

    model = args.model if args.model is not None else str(default_model_path())
    import runpy

    sys.argv = ["llama_cpp.server", *server_argv(model, host=args.host, port=args.port, n_ctx=args.n_ctx,
                                                 n_threads=args.n_threads, seed=args.seed,
                                                 extra=extra)]
    with safe_server_settings(args.max_tokens_cap, args.prompt_cache_mb << 20):
        runpy.run_module("llama_cpp.server", run_name="__main__")
    return 0


# -- as a child process -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ModelServer:
    """A ``serve-model`` child process: ``url`` (its ``/v1``), ``log_path`` (its output), ``stop()``."""

    def __init__(self, process: subprocess.Popen, url: str, log_path: Path, log: Any) -> None:
        self.process = process
        self.url = url
        self.log_path = log_path
        self._log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> None:
        """End the server (SIGTERM, then SIGKILL after ``timeout`` seconds); idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        self._log.close()

    def __enter__(self) -> "ModelServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ModelServer(url={self.url!r}, pid={self.pid})"


def start_model_server(model: str | Path | None = None, *, port: int | None = None, n_ctx: int = 8192,
                       n_threads: int | None = None, seed: int = 0, max_tokens_cap: int = MAX_TOKENS_CAP,
                       prompt_cache_mb: int = PROMPT_CACHE_MB, extra: Sequence[str] = (),
                       log_path: str | Path | None = None, timeout: float = START_TIMEOUT) -> ModelServer:
    """Start ``python -m toh_nb serve-model`` on 127.0.0.1 and wait until it answers (see the module
    docstring); its output goes to ``log_path`` (a temporary file by default)."""
    port = port or free_port()
    command = [sys.executable, "-m", "toh_nb", "serve-model", "--exit-with-stdin", "--port", str(port),
               "--n-ctx", str(n_ctx), "--seed", str(seed), "--max-tokens-cap", str(max_tokens_cap),
               "--prompt-cache-mb", str(prompt_cache_mb)]
    if model is not None:
        command += ["--model", str(model)]
    if n_threads is not None:
        command += ["--n-threads", str(n_threads)]
    if extra:
        command += ["--", *extra]
    if log_path is None:
        handle, name = tempfile.mkstemp(prefix="toh-nb-serve-", suffix=".log")
        os.close(handle)
        log_path = name
    log_path = Path(log_path)
    log = open(log_path, "w")  # a pipe nobody reads would fill up and block the server
    # unbuffered: the log shows each request as it happens (the server's own prints are Python prints)
    # stdin: a pipe only this process holds (close_fds: no other child inherits it), so the server stops
    # when this process goes, even killed (--exit-with-stdin); stop() ends it first
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"}, close_fds=True)
    server = ModelServer(process, f"http://127.0.0.1:{port}/v1", log_path, log)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            server.stop()
            raise ModelError(f"serve-model exited with {process.returncode}: {server.log_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/models", timeout=2):
                return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise ModelError(f"serve-model did not answer within {timeout:.0f}s (log: {log_path})") from None
            time.sleep(0.2)
