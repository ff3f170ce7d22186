"""Every numeric and flag parameter of the public API goes through one checker (toh_nb.core.checks):
a wrong type, NaN, a negative value or a value past the documented maximum is a UsageError naming the
Python parameter, never an OverflowError/TypeError/AttributeError from deep inside."""

from __future__ import annotations

import pytest

import toh_nb as tn
from toh_nb.core.checks import MAX_COUNT, MAX_SECONDS, check_count, check_seconds, shown
from toh_nb.store.jsonl import JsonlStore

HUGE = 10**400  # cannot become a float: OverflowError wherever it is compared with one
HUGE_SHOWN = shown(HUGE)


@pytest.fixture(scope="module")
def hub():
    with tn.Hub(tn.FunctionModel(lambda request: "done")) as hub:
        hub.child_handle = hub.start("wait for me")
        hub.job_handle = hub.spawn("in the background", background=True)
        yield hub


def _stream(hub, **options):
    return next(hub.stream(**options))


# (entry point, parameter, call with the bad value)
SECONDS = [
    ("Hub", "turn_timeout", lambda hub, v: tn.Hub(turn_timeout=v)),
    ("AsyncHub", "turn_timeout", lambda hub, v: tn.AsyncHub(turn_timeout=v)),
    ("Hub.spawn", "turn_timeout", lambda hub, v: hub.spawn("x", turn_timeout=v)),
    ("Hub.spawn(background)", "turn_timeout", lambda hub, v: hub.spawn("x", background=True, turn_timeout=v)),
    ("Hub.start", "turn_timeout", lambda hub, v: hub.start("x", turn_timeout=v)),
    ("SubagentTool", "turn_timeout", lambda hub, v: tn.Hub(tools=[tn.SubagentTool(turn_timeout=v)])),
    ("Hub.run", "timeout", lambda hub, v: hub.run("x", timeout=v)),
    ("Job.output", "timeout", lambda hub, v: hub.job_handle.output(wait=True, timeout=v)),
    ("Child.wait", "timeout", lambda hub, v: hub.child_handle.wait(timeout=v)),
    ("Hub.stream", "timeout", lambda hub, v: _stream(hub, timeout=v)),
    ("Hub.tree", "interval", lambda hub, v: hub.tree(interval=v)),
    ("DemoModel", "latency", lambda hub, v: tn.DemoModel(latency=v)),
    ("OpenAIChatModel", "timeout", lambda hub, v: tn.OpenAIChatModel("m", timeout=v)),
    ("OpenAIChatModel", "backoff", lambda hub, v: tn.OpenAIChatModel("m", backoff=v)),
    ("OpenAIChatModel", "max_backoff", lambda hub, v: tn.OpenAIChatModel("m", max_backoff=v)),
    ("JsonlStore", "batch_interval", lambda hub, v: JsonlStore(hub.tmp, batch_interval=v)),
]

COUNTS = [
    ("Hub", "max_tokens", lambda hub, v: tn.Hub(max_tokens=v)),
    ("Hub", "max_steps", lambda hub, v: tn.Hub(max_steps=v)),
    ("Hub", "token_budget", lambda hub, v: tn.Hub(token_budget=v)),
    ("Hub", "history", lambda hub, v: tn.Hub(history=v)),
    ("Hub", "max_parallel_tool_calls", lambda hub, v: tn.Hub(max_parallel_tool_calls=v)),
    ("Hub", "max_jobs_per_owner", lambda hub, v: tn.Hub(max_jobs_per_owner=v)),
    ("AsyncHub", "history", lambda hub, v: tn.AsyncHub(history=v)),
    ("Hub.spawn", "max_tokens", lambda hub, v: hub.spawn("x", max_tokens=v)),
    ("Hub.spawn", "max_steps", lambda hub, v: hub.spawn("x", max_steps=v)),
    ("Hub.start", "token_budget", lambda hub, v: hub.start("x", token_budget=v)),
    ("SubagentTool", "max_tokens", lambda hub, v: tn.Hub(tools=[tn.SubagentTool(max_tokens=v)])),
    ("SubagentTool", "max_steps", lambda hub, v: tn.Hub(tools=[tn.SubagentTool(max_steps=v)])),
    ("Hub.tree", "max_nodes", lambda hub, v: hub.tree(max_nodes=v)),
    ("OpenAIChatModel", "max_tokens", lambda hub, v: tn.OpenAIChatModel("m", max_tokens=v)),
    ("OpenAIChatModel", "max_retries", lambda hub, v: tn.OpenAIChatModel("m", max_retries=v)),
    ("JsonlStore", "max_open", lambda hub, v: JsonlStore(hub.tmp, max_open=v)),
]


@pytest.fixture(autouse=True)
def _tmp(request, tmp_path):
    if "hub" in request.fixturenames:
        request.getfixturevalue("hub").tmp = tmp_path / "store"


def _ids(cases):
    return [f"{entry}-{name}" for entry, name, _ in cases]


@pytest.mark.parametrize("entry,name,call", SECONDS, ids=_ids(SECONDS))
def test_every_seconds_parameter_refuses_a_huge_number_naming_itself(hub, entry, name, call):
    for huge, text in ((HUGE, HUGE_SHOWN), (MAX_SECONDS + 1, str(MAX_SECONDS + 1)), (float("inf"), "inf")):
        with pytest.raises(tn.UsageError) as error:
            call(hub, huge)
        assert str(error.value).startswith(f"{name} must be at most {MAX_SECONDS} seconds")
        assert str(error.value).endswith(f", got {text}")


@pytest.mark.parametrize("entry,name,call", SECONDS, ids=_ids(SECONDS))
def test_every_seconds_parameter_refuses_wrong_types_nan_and_negatives(hub, entry, name, call):
    for bad in (True, "5", float("nan"), -1, [1]):
        with pytest.raises(tn.UsageError) as error:
            call(hub, bad)
        assert str(error.value).startswith(f"{name} must be a ")
        assert str(error.value).endswith(f", got {bad!r}")


@pytest.mark.parametrize("entry,name,call", COUNTS, ids=_ids(COUNTS))
def test_every_count_parameter_refuses_a_huge_number_naming_itself(hub, entry, name, call):
    for huge, text in ((HUGE, HUGE_SHOWN), (MAX_COUNT + 1, str(MAX_COUNT + 1))):
        with pytest.raises(tn.UsageError) as error:
            call(hub, huge)
        assert str(error.value) == f"{name} must be at most {MAX_COUNT}, got {text}"


@pytest.mark.parametrize("entry,name,call", COUNTS, ids=_ids(COUNTS))
def test_every_count_parameter_refuses_wrong_types(hub, entry, name, call):
    for bad in (True, 2.5, "3", float("nan"), -1):
        with pytest.raises(tn.UsageError) as error:
            call(hub, bad)
        assert str(error.value).startswith(f"{name} must be an integer >= ")
        assert str(error.value).endswith(f", got {bad!r}")


def test_the_messages_of_the_shared_checker():
    assert check_seconds(None, "timeout") is None
    assert check_seconds(MAX_SECONDS, "timeout") == float(MAX_SECONDS)
    assert check_count(MAX_COUNT, "history", minimum=0) == MAX_COUNT
    with pytest.raises(tn.UsageError) as error:
        check_seconds(HUGE, "turn_timeout", positive=True)
    assert str(error.value) == ("turn_timeout must be at most 1000000000 seconds (None means no limit), "
                                "got 10000000000000000000\u2026 (401 characters)")
    with pytest.raises(tn.UsageError) as error:
        check_seconds(0, "turn_timeout", positive=True)
    assert str(error.value) == "turn_timeout must be a positive number of seconds or None (no limit), got 0"
    with pytest.raises(tn.UsageError) as error:
        check_count(None, "max_open")
    assert str(error.value) == "max_open must be an integer >= 1, got None"


def test_max_depth_errors_name_the_python_parameter():
    for bad in ("3", -1, 1.5, True, 2**53):
        with pytest.raises(tn.UsageError) as error:
            tn.Hub(max_depth=bad)
        assert str(error.value) == (f'max_depth must be an integer from 0 to {MAX_COUNT} or "provider-managed", '
                                    f"got {bad!r}")
    with pytest.raises(tn.UsageError, match="^max_depth must be an integer from 0"):
        tn.Hub(tools=[tn.SubagentTool(name="deep", max_depth="3")])


def test_a_provider_entry_that_is_not_a_provider_is_named():
    with pytest.raises(tn.UsageError) as error:
        tn.Hub(providers={"ray": "ray"})
    assert str(error.value) == (
        'providers["ray"] must be a subagent provider (an object with a Capabilities `capabilities` and a '
        "plan() or plan_now() method, such as tn.AcpAgent(...) or tn.RayProvider()), got str")
    with pytest.raises(tn.UsageError, match=r'^providers\["x"\] must be a subagent provider .* got NoneType$'):
        tn.Hub(providers={"x": None})


def test_an_unknown_provider_name_lists_the_registered_ones(hub):
    expected = 'no subagent provider registered for "nope"; registered providers: spawn, fork'
    for call in (lambda: hub.spawn("x", provider="nope"), lambda: hub.start("x", provider="nope"),
                 lambda: hub.spawn("x", provider="nope", background=True),
                 lambda: tn.Hub(tools=[tn.SubagentTool(name="other", provider="nope")])):
        with pytest.raises(tn.ProviderError) as error:
            call()
        assert str(error.value) == expected and error.value.code == "NO_PROVIDER"
    with pytest.raises(tn.UsageError, match="^provider must be a string, got list$"):
        tn.Hub(tools=[tn.SubagentTool(name="other", provider=["spawn"])])


@pytest.mark.parametrize("call,message", [
    (lambda hub: _stream(hub, history="yes", timeout=0), "history must be True or False, got 'yes'"),
    (lambda hub: _stream(hub, kinds=3, timeout=0),
     "kinds must be a list of event kind strings, e.g. ['turn/end', 'subagent/end']"),
    (lambda hub: tn.Hub(delegation_tools=3),
     "delegation_tools must be a list of tn.SubagentTool (or dicts of its settings), got int"),
    (lambda hub: tn.AsyncHub(tools=3), "tools must be a list of functions or tn.Tool objects, got int"),
    (lambda hub: tn.Hub(fsync="often"), 'fsync must be "batch", "always" or "never", got \'often\''),
    (lambda hub: tn.Hub(tools=[tn.SubagentTool(name="x", enable_run_in_background=[])]),
     "enable_run_in_background must be True or False, got []"),
])
def test_wrong_types_elsewhere_name_the_parameter(hub, call, message):
    with pytest.raises(tn.UsageError) as error:
        call(hub)
    assert str(error.value) == message
