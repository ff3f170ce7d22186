"""What ``python -m toh_nb acp`` and ``python -m toh_nb mcp`` do before serving: one place, so the two
faces of a hub treat their command line alike (the options themselves: ``toh_nb.__main__``)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable

from ..core.errors import UsageError


def model_from(name: str, base_url: str | None, latency: float) -> Any:
    """``demo`` → the offline DemoModel; anything else → an OpenAI-compatible model of that name."""
    if name == "demo":
        from ..models.demo import DemoModel

        return DemoModel(latency=latency)
    from ..models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(name, base_url=base_url) if base_url else OpenAIChatModel(name)


def prepare(command: str, args: Any, check_sdk: Callable[[], Any]) -> tuple[Any, str | None] | int:
    """Logging to stderr (the protocol owns stdout), the extra's SDK, the ``--store`` directory made and
    the model built: ``(model, store)``, or the exit status 2 after a one-line error naming what is wrong."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format=f"toh_nb {command}: %(message)s")
    try:
        check_sdk()
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
    return model_from(args.model, args.base_url, args.latency), store
