"""How MCP tools are named for the model (``toh_nb.mcp.mounts.exposed_names``): clashes prefixed, names
outside ``^[a-zA-Z0-9_-]{1,64}$`` mapped and, when too long or meeting another name, given a short hash."""

from __future__ import annotations

import hashlib
import re
import sys

import pytest

import toh_nb as tn
from toh_nb.mcp.config import MAX_TOOL_NAME
from toh_nb.mcp.mounts import exposed_names

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def server(name, prefix=False):
    return tn.MCPServer([sys.executable, "-c", "pass"], name=name, prefix=prefix)


def digest(server_name, tool):
    return hashlib.sha256(f"{server_name}\x1f{tool}".encode()).hexdigest()[:8]


def test_the_model_api_limit_is_64_characters_of_letters_digits_underscore_and_dash():
    assert MAX_TOOL_NAME == 64


def test_plain_names_are_kept_and_clashes_prefixed():
    a, b = server("a"), server("b")
    assert exposed_names([(a, "read"), (a, "write"), (b, "read")], taken=["subagent"]) == ["a_read", "write", "b_read"]
    assert exposed_names([(a, "subagent")], taken=["subagent"]) == ["a_subagent"]
    assert exposed_names([(server("c", prefix=True), "x")]) == ["c_x"]


def test_characters_outside_the_pattern_become_underscores():
    s = server("s")
    assert exposed_names([(s, "files.read"), (s, "café/list")]) == ["files_read", "caf__list"]


def test_a_remapped_name_meeting_an_exact_one_takes_a_hash_and_the_exact_one_keeps_its_name():
    s = server("s")
    names = exposed_names([(s, "files.read"), (s, "files_read")])
    assert names == [f"files_read_{digest('s', 'files.read')}", "files_read"]
    # the same in the other order: the server's exact name wins whatever the listing order
    assert exposed_names([(s, "files_read"), (s, "files.read")]) == names[::-1]


def test_a_name_over_64_characters_is_cut_with_a_hash_deterministically_and_uniquely():
    s = server("s")
    long_a = "summarise_" + "a" * 70
    long_b = "summarise_" + "a" * 69 + "b"  # the same first 55 characters
    names = exposed_names([(s, long_a), (s, long_b)])
    assert names == [long_a[:55] + "_" + digest("s", long_a), long_b[:55] + "_" + digest("s", long_b)]
    assert names[0] != names[1] and all(len(n) == 64 and VALID.match(n) for n in names)
    assert exposed_names([(s, long_a)]) == names[:1]  # deterministic: the same tool, the same name


def test_exactly_64_characters_is_kept_and_a_prefix_that_overflows_is_cut():
    s, t = server("s"), server("t")
    name = "x" * 64
    assert exposed_names([(s, name)]) == [name]
    clash = exposed_names([(s, name), (t, name)])
    assert clash == [("s_" + name)[:55] + "_" + digest("s", name), ("t_" + name)[:55] + "_" + digest("t", name)]
    assert all(VALID.match(n) for n in clash)


def test_two_servers_of_the_same_name_clashing_are_refused_naming_both():
    one, two = server("same"), server("same")
    with pytest.raises(tn.UsageError) as caught:
        exposed_names([(one, "read"), (two, "read")])
    assert str(caught.value) == (f'MCP tool name "same_read" is offered by {one.display} and {two.display}; '
                                 "give one of the servers another name=")


@pytest.mark.parametrize("tool", ["", "ünïcödé", "a" * 200, "with space", "x.y.z" * 30, "-", "名前"])
def test_every_exposed_name_fits_the_pattern(tool):
    [name] = exposed_names([(server("a server name with spaces and more than enough characters to overflow"), tool)],
                           taken=[])
    assert VALID.match(name), name
