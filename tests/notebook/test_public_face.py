"""``toh_nb/notebook/`` reads only the hub's public face and its events (issue 28): no engine internals
(the runtime, the job registry, the store object), no engine package but the ones the face is made of,
and no ``sys.modules`` reads."""

from __future__ import annotations

import pathlib
import re

NOTEBOOK = pathlib.Path(__file__).resolve().parents[2] / "toh_nb" / "notebook"

#: reads of engine internals through a hub object, and imports of engine packages the face wraps
FORBIDDEN = {
    "an engine internal read through the hub": re.compile(r"\.(runtime|job_registry|_runtime|_jobs|_service)\b"),
    "the hub's store object": re.compile(r"(hub|_async|inner)\.(store|_store)\b"),
    "a sys.modules read": re.compile(r"\bsys\.modules\b"),
    "an import of the engine's jobs or subagents packages": re.compile(
        r"^\s*(from|import)\s+(\.\.|toh_nb\.)(jobs|subagents|store)\b", re.MULTILINE),
}


def test_the_notebook_layer_reads_only_the_public_face():
    offenders = []
    for path in sorted(NOTEBOOK.glob("*.py")):
        text = path.read_text()
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                offenders.append(f"{path.name}:{line}: {what}: {match.group(0).strip()}")
    assert offenders == []
