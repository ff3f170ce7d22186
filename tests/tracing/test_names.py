"""Every convention name toh_nb puts on spans is the installed GenAI semantic conventions' name."""

from __future__ import annotations

import pytest

from toh_nb.tracing import names

gen_ai = pytest.importorskip("opentelemetry.semconv._incubating.attributes.gen_ai_attributes")
server = pytest.importorskip("opentelemetry.semconv.attributes.server_attributes")
error = pytest.importorskip("opentelemetry.semconv.attributes.error_attributes")


def _values(module) -> set[str]:
    return {value for key, value in vars(module).items() if key.isupper() and isinstance(value, str)}


DEPRECATED = {"gen_ai.system", "gen_ai.prompt", "gen_ai.completion", "gen_ai.usage.prompt_tokens",
              "gen_ai.usage.completion_tokens"}


def test_attribute_names_are_the_conventions():
    known = _values(gen_ai) | _values(server) | _values(error)
    assert [name for name in names.CONVENTION_NAMES if name not in known] == []
    assert not DEPRECATED & set(names.CONVENTION_NAMES)


def test_operation_names_are_the_conventions_values():
    values = {member.value for member in gen_ai.GenAiOperationNameValues}
    assert set(names.OPERATIONS) <= values
    assert (names.INVOKE_AGENT, names.CHAT, names.EXECUTE_TOOL) == ("invoke_agent", "chat", "execute_tool")


async def test_every_gen_ai_attribute_on_real_spans_is_a_convention_name(traced):
    import toh_nb as tn

    async with tn.AsyncHub(tn.DemoModel(latency=0), tracing=traced.provider) as hub:
        await hub.run("Plan a garden")
    seen = {key for span in traced.spans for key in span.attributes if key.startswith(("gen_ai.", "server.", "error."))}
    assert seen  # the run made spans with convention attributes
    assert seen <= set(names.CONVENTION_NAMES)
    assert {span.attributes["gen_ai.operation.name"] for span in traced.spans} == set(names.OPERATIONS)
    for span in traced.spans:  # span names are "<operation> <subject>", as the conventions name them
        assert span.name.split(" ")[0] == span.attributes["gen_ai.operation.name"]
