"""The version checks that guard every use of another library's internals (:mod:`toh_nb.core.versions`)."""

from __future__ import annotations

import pytest

from toh_nb.core import versions
from toh_nb.core.versions import Quirk, parse_version


@pytest.mark.parametrize("text, parsed", [("7.4.0", (7, 4, 0)), ("6.31.0", (6, 31, 0)), ("8.0.0a1", (8, 0, 0)),
                                          ("2.60.0.dev0", (2, 60, 0)), ("27.3", (27, 3)), (" 7 ", (7,)),
                                          ("7.0.0rc2", (7, 0, 0)), ("dev", ())])
def test_a_version_reads_as_its_numbers(text, parsed):
    assert parse_version(text) == parsed


QUIRK = Quirk("hook", (("ipykernel", (7, 4), (8,)), ("pyzmq", (17,), (28,))))


@pytest.mark.parametrize("ipykernel", [(7, 4), (7, 4, 0), (7, 9, 3), (7, 99)])
def test_a_quirk_is_on_for_the_versions_it_is_known_to_work_on(ipykernel):
    assert QUIRK.problem({"ipykernel": ipykernel, "pyzmq": (27, 3, 0)}) is None


def test_a_quirk_is_off_below_above_or_without_its_package_and_says_why():
    assert QUIRK.problem({"ipykernel": (7, 3, 0), "pyzmq": (27, 3, 0)}) == (
        "ipykernel 7.3.0 is outside 7.4 to before 8, the versions this is known to work on")
    assert QUIRK.problem({"ipykernel": (8, 0, 0), "pyzmq": (27, 3, 0)}) == (
        "ipykernel 8.0.0 is outside 7.4 to before 8, the versions this is known to work on")
    assert QUIRK.problem({"ipykernel": (7, 4, 0), "pyzmq": (28, 0)}) == (
        "pyzmq 28.0 is outside 17 to before 28, the versions this is known to work on")
    assert QUIRK.problem({"ipykernel": None, "pyzmq": (27, 3, 0)}) == "ipykernel is not installed"
    assert QUIRK.problem({"pyzmq": (27, 3, 0)}) == "ipykernel is not installed"


def test_installed_versions_come_from_the_metadata():
    from importlib import metadata

    found = versions.installed(["pytest", "no-such-distribution-toh-nb"])
    assert found == {"pytest": parse_version(metadata.version("pytest")), "no-such-distribution-toh-nb": None}
    assert found["pytest"][0] >= 7
