"""The one touch of Ray's internals, behind its version check (:mod:`toh_nb.providers.ray.ray_adapter`):
on the installed Ray a local cluster is kept on loopback; on a Ray version the adapter does not know,
only the documented environment variable is set and the log says so, once."""

from __future__ import annotations

import importlib
import logging
import os
from importlib import metadata

import pytest

from toh_nb.core.versions import parse_version
from toh_nb.providers.ray import ray_adapter


@pytest.fixture
def switch(monkeypatch):
    """Ray's read switch and the environment variable, restored after the test; the switch's value now."""
    constants = importlib.import_module(ray_adapter.CONSTANTS_MODULE)
    monkeypatch.setattr(constants, ray_adapter.CLUSTER_SWITCH, True)  # what Ray reads on Linux by default
    monkeypatch.delenv(ray_adapter.SINGLE_NODE_VARIABLE, raising=False)
    return lambda: getattr(constants, ray_adapter.CLUSTER_SWITCH)


def test_the_installed_ray_is_one_the_adapter_knows():
    assert ray_adapter.versions() == {"ray": parse_version(metadata.version("ray"))}
    assert ray_adapter.status() == {"single_node": None}


def test_on_a_known_ray_the_cluster_is_made_single_node(switch, monkeypatch, caplog):
    monkeypatch.setattr(ray_adapter, "versions", lambda: {"ray": (2, 9, 0)})
    with caplog.at_level(logging.WARNING, logger="toh_nb"):
        assert ray_adapter.keep_on_loopback() is True
    assert switch() is False
    assert os.environ[ray_adapter.SINGLE_NODE_VARIABLE] == "0"
    assert caplog.records == []


@pytest.mark.parametrize("faked, why", [
    ((3, 0, 0), "ray 3.0.0 is outside 2.9 to before 3, the versions this is known to work on"),
    ((2, 8, 1), "ray 2.8.1 is outside 2.9 to before 3, the versions this is known to work on")])
def test_on_an_unknown_ray_only_the_variable_is_set_and_the_log_says_so_once(switch, monkeypatch, caplog, faked, why):
    monkeypatch.setattr(ray_adapter, "versions", lambda: {"ray": faked})
    assert ray_adapter.status() == {"single_node": why}
    with caplog.at_level(logging.WARNING, logger="toh_nb"):
        assert ray_adapter.keep_on_loopback() is False
        assert ray_adapter.keep_on_loopback() is False
    assert switch() is True  # Ray's internals untouched
    assert os.environ[ray_adapter.SINGLE_NODE_VARIABLE] == "0"
    assert [record.getMessage() for record in caplog.records] == [
        f"toh_nb: the local Ray cluster may listen on every interface, not only 127.0.0.1 ({why}); "
        "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before importing ray to keep it there"]


def test_the_users_own_setting_of_the_variable_is_left_alone(switch, monkeypatch, caplog):
    monkeypatch.setenv(ray_adapter.SINGLE_NODE_VARIABLE, "1")
    with caplog.at_level(logging.WARNING, logger="toh_nb"):
        assert ray_adapter.keep_on_loopback() is False
    assert switch() is True and caplog.records == []


def test_the_local_cluster_started_here_listens_on_loopback(ray_cluster):
    """The session's cluster was started after ``loopback_only()`` (tests/ray/conftest.py)."""
    nodes = [node for node in ray_cluster.nodes() if node["Alive"]]
    assert nodes and {node["NodeManagerAddress"] for node in nodes} == {"127.0.0.1"}
