"""The price table (toh_nb/costs.py): per-agent and subtree costs, never a made-up number."""

from __future__ import annotations

import pytest

import toh_nb as tn
from toh_nb.costs import CostBook, check_prices, format_cost, model_name


def priced(request: tn.ModelRequest) -> tn.ModelResponse:
    # 1,000 tokens in and 100 out per answer, whoever asks
    return tn.ModelResponse(text=f"done: {request.last_user_text}", usage=tn.Usage(1000, 100))


def test_model_names_come_from_the_model_object():
    assert model_name(tn.FunctionModel(priced, name="gpt-4o-mini")) == "gpt-4o-mini"
    assert model_name(tn.DemoModel()) == "demo"
    assert model_name(object()) is None


@pytest.mark.parametrize(("prices", "message"), [
    ([("m", (1, 2))], "prices must be a dict {model name: (input price, output price) per million tokens}, got list"),
    ({"": (1, 2)}, "prices: a model name must be a non-empty string, got ''"),
    ({"m": (1,)}, "prices['m'] must be (input, output) prices per million tokens, two numbers >= 0, got (1,)"),
    ({"m": (1, -2)}, "prices['m'] must be (input, output) prices per million tokens, two numbers >= 0, got (1, -2)"),
    ({"m": (True, 2)}, "prices['m'] must be (input, output) prices per million tokens, two numbers >= 0, got (True, 2)"),
])
def test_bad_price_tables_are_refused_with_what_is_wrong(prices, message):
    with pytest.raises(tn.UsageError) as error:
        check_prices(prices)
    assert str(error.value) == message
    with pytest.raises(tn.UsageError):
        tn.AsyncHub(prices=prices)


def test_subtree_cost_adds_only_known_costs():
    book = CostBook({"a": (1.0, 2.0)})
    book.models.update({"root": "a", "x": "unpriced", "y": "a"})
    rows = [{"id": "root", "parent": None, "input_tokens": 1_000_000, "output_tokens": 0},
            {"id": "x", "parent": "root", "input_tokens": 5, "output_tokens": 5},
            {"id": "y", "parent": "x", "input_tokens": 0, "output_tokens": 500_000},
            {"id": "z", "parent": "root", "input_tokens": 9, "output_tokens": 9}]  # model never seen
    book.fill(rows, runtime=type("R", (), {"agents": {}})())
    assert [(r["id"], r["cost"], r["subtree_cost"]) for r in rows] == [
        ("root", 1.0, 2.0), ("x", None, 1.0), ("y", 1.0, 1.0), ("z", None, None)]
    assert format_cost(0.000027) == "0.000027" and format_cost(None) == ""


def test_agent_rows_carry_costs_of_finished_children_and_unpriced_models_have_none():
    with tn.Hub(tn.FunctionModel(priced, name="gpt-4o-mini"), ids="sequential",
                prices={"gpt-4o-mini": (0.15, 0.60)}) as hub:
        hub.spawn("Sum it up", label="summary")
        hub.spawn("Other", label="other", model=tn.FunctionModel(priced, name="local-thing"))
        rows = hub.async_hub.view.agents()
        got = [(r["id"], r["cost"], r["subtree_cost"]) for r in rows]
        assert got == [("root", 0.0, pytest.approx(0.00021)), ("agent-1", pytest.approx(0.00021),
                                                                 pytest.approx(0.00021)),
                       ("agent-2", None, None)]
        frame = hub.agents()
        assert list(frame.columns).index("cost") == list(frame.columns).index("tokens_left") + 1
        assert frame["cost"].tolist()[1] == pytest.approx(0.00021)


def test_without_prices_there_is_no_cost():
    with tn.Hub(tn.FunctionModel(priced, name="gpt-4o-mini"), ids="sequential") as hub:
        hub.spawn("Sum it up", label="summary")
        assert {(r["cost"], r["subtree_cost"]) for r in hub.async_hub.view.agents()} == {(None, None)}
