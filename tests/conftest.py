"""Shared fixtures."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture
def no_leftover_tasks():
    """Assert (inside an asyncio.run body) that no task but the current one is pending."""

    def check() -> None:
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
        assert pending == [], f"orphaned tasks: {pending}"

    return check
