"""Without the ``mcp`` extra there is nothing here to test (tests/test_main.py-style install-line checks
live in test_config.py, which needs the SDK's types)."""

import importlib.util

collect_ignore_glob = ["test_*.py"] if importlib.util.find_spec("mcp") is None else []
