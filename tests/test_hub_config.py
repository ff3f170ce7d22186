"""HubConfig: one definition of the hub's options (fields, defaults, checks) that both twins use."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

import toh_nb as tn
from toh_nb.config import FIELDS, HubConfig


def keywords(cls) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]


def test_both_constructors_list_exactly_the_configs_fields_with_its_defaults():
    config = [(f.name, f.default) for f in dataclasses.fields(HubConfig)]
    assert keywords(tn.AsyncHub) == config
    assert [k for k in keywords(tn.Hub) if k[0] != "loop"] == config  # the sync twin adds its loop mode
    assert ("loop", "portal") in keywords(tn.Hub)
    assert FIELDS == tuple(name for name, _ in config) and "gc" in FIELDS


@pytest.mark.parametrize(("options", "message"), [
    ({"max_tokens": 0}, "max_tokens must be"),
    ({"background_mode": "sometimes"}, 'background_mode must be "one-shot" or "continuable", got \'sometimes\''),
    ({"fsync": "sometimes"}, 'fsync must be "batch", "always" or "never", got \'sometimes\''),
    ({"tools": "search"}, "tools must be a list of functions or tn.Tool objects, got str"),
    ({"providers": ["ray"]}, "providers must be a dict of name -> provider, got list"),
    ({"gc": "freeze"}, "gc must be True, False or None, got 'freeze'"),
])
def test_a_refused_option_is_the_same_error_from_both_twins_and_from_the_config(tmp_path, options, message):
    errors = []
    for build in (lambda: HubConfig(**options), lambda: tn.AsyncHub(**options),
                  lambda: tn.Hub(store=str(tmp_path / "runs"), **options)):
        with pytest.raises(tn.UsageError) as caught:
            build()
        errors.append(str(caught.value))
    assert len(set(errors)) == 1 and errors[0].startswith(message)
    assert not (tmp_path / "runs").exists()  # refused before the store directory was made or locked


def test_a_refused_configuration_does_not_take_over_the_open_hub_on_its_store(tmp_path, capsys):
    store = str(tmp_path / "runs")
    with tn.Hub(ids="sequential", store=store) as first:
        with pytest.raises(tn.UsageError):
            tn.Hub(ids="sequential", store=store, max_jobs_per_owner=0)
        assert not first.closed and first.spawn("still here").agent_id == "agent-1"
    assert "took it over" not in capsys.readouterr().out


def test_a_hub_is_built_from_a_config_and_shows_it():
    config = HubConfig(tn.FunctionModel(lambda r: "ok"), ids="sequential", max_depth=2)

    async def main():
        async with tn.AsyncHub.from_config(config) as hub:
            return hub.config is config, (await hub.spawn("x")).text

    assert asyncio.run(main()) == (True, "ok")
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), ids="sequential", max_depth=2) as hub:
        assert hub.config.max_depth == 2 and hub.config.ids == "sequential" and hub.config.store is not None
    with pytest.raises(tn.UsageError, match="^from_config needs a toh_nb.HubConfig, got dict$"):
        tn.AsyncHub.from_config({"ids": "sequential"})
    assert config.replace(max_depth=4).max_depth == 4
    with pytest.raises(tn.UsageError):
        config.replace(max_depth=-1)


class EmptyPath:
    def __fspath__(self):
        return ""


@pytest.mark.parametrize("store", ["", b"", EmptyPath()], ids=["str", "bytes", "pathlike"])
def test_an_empty_store_path_is_refused_and_the_current_directory_stays_untouched(tmp_path, monkeypatch, store):
    """``store=os.environ.get("RUNS", "")``: an unset variable must not make the current directory a store."""
    monkeypatch.chdir(tmp_path)
    message = ('store is an empty path (an unset environment variable?); pass a directory, "." for the current '
               "one, or None for an in-memory store")
    for build in (lambda: HubConfig(store=store), lambda: tn.AsyncHub(store=store), lambda: tn.Hub(store=store)):
        with pytest.raises(tn.UsageError) as caught:
            build()
        assert str(caught.value) == message
    assert list(tmp_path.iterdir()) == []


def test_the_current_directory_said_on_purpose_is_a_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with tn.Hub(tn.FunctionModel(lambda r: "ok"), store=".", ids="sequential") as hub:
        assert hub.spawn("x").text == "ok"
    assert (tmp_path / "root.jsonl").exists()
