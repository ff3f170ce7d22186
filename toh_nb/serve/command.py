"""What ``python -m toh_nb acp`` and ``python -m toh_nb mcp`` do before serving: one place, so the two
faces of a hub treat their command line alike (the options themselves: ``toh_nb.__main__``)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable

from ..core.errors import UsageError


def model_from(name: str, base_url: str | None, latency: float) -> Any:
    """``--model`` read by the one parser of model names (``toh_nb.models.names``): ``demo`` (with
    ``--latency``), ``local[:PATH.gguf]``, ``openai:NAME[@URL]``, ``ollama:NAME[@URL]``, ... — and, as
    before, a bare name is an OpenAI-compatible model of that name. ``--base-url`` is the URL of a
    server name that has none; a UsageError names what is wrong."""
    from ..models.names import build_model, parse_model_name

    spec = parse_model_name(name, argument="--model", bare="openai")
    return build_model(spec, base_url=base_url, demo_latency=latency, argument="--model", text=name)


def prepare(command: str, args: Any, check_sdk: Callable[[], Any]) -> tuple[Any, str | None] | int:
    """Logging to stderr (the protocol owns stdout), the extra's SDK, the ``--store`` directory made and
    the model built: ``(model, store)``, or the exit status 2 after a one-line error naming what is wrong."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format=f"toh_nb {command}: %(message)s")
    try:
        check_sdk()
        model = model_from(args.model, args.base_url, args.latency)
    except UsageError as error:
        print(f"toh-nb {command}: error: {error}", file=sys.stderr)
        return 2
    store = os.path.abspath(args.store) if args.store else None
    if store is not None:
        try:
            os.makedirs(store, exist_ok=True)
        except OSError as error:
            print(f"toh-nb {command}: error: --store {store!r} is not a usable directory: {error.strerror}",
                  file=sys.stderr)
            return 2
    return model, store
