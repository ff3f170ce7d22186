"""DemoModel placeholder (replaced by the full planner/worker demo)."""

from __future__ import annotations

from .base import ModelRequest, ModelResponse


class DemoModel:
    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=f"(demo) {request.last_user_text}")
