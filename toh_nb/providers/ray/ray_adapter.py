"""The one touch of Ray's internals, behind a version check (issue 43).

A local cluster started for one notebook should listen on 127.0.0.1 only. Ray has a documented switch
for that, the environment variable ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` (``0``: single-node mode, every
server on loopback, what Ray does on macOS and Windows), but Ray reads it once, when ``ray`` is imported;
toh_nb is asked to start a cluster later, after the user (or toh_nb itself) imported Ray. So the value Ray
read is set again where it keeps it, ``ray._private.ray_constants.ENABLE_RAY_CLUSTER``, which Ray reads
again when it starts a node (:data:`SINGLE_NODE`). That is a private module: it is touched only on the
Ray versions it is known to be there and mean that; elsewhere only the environment variable is set (it
works when Ray is imported after it) and :func:`keep_on_loopback` says, once, in the ``toh_nb`` log,
that the cluster may listen where Ray's default puts it (every interface).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os

from ...core.versions import Quirk, Version, installed

#: Ray's documented switch (``0``: single-node mode, servers on loopback), read when ``ray`` is imported
SINGLE_NODE_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: where Ray keeps the value it read (private: no public way to set it once Ray is imported)
CONSTANTS_MODULE = "ray._private.ray_constants"
CLUSTER_SWITCH = "ENABLE_RAY_CLUSTER"
#: setting the read value again: known on Ray 2.9 (the ``ray`` extra's lowest) up to, not including, 3
SINGLE_NODE = Quirk("single_node", (("ray", (2, 9), (3,)),))
#: what the log says where the read value cannot be set (one place for the text)
NOT_LOOPBACK = ("toh_nb: the local Ray cluster may listen on every interface, not only 127.0.0.1 ({why}); "
                "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before importing ray to keep it there")

log = logging.getLogger("toh_nb")


@functools.cache
def _installed() -> dict[str, Version | None]:
    return installed(("ray",))


def versions() -> dict[str, Version | None]:
    """``{"ray": (2, 60, 0)}`` (None: not installed), read once per process. A test fakes another Ray by
    replacing this function."""
    return _installed()


def status() -> dict[str, str | None]:
    """Each quirk's name -> None (on) or why it is off."""
    return {SINGLE_NODE.name: SINGLE_NODE.problem(versions())}


def keep_on_loopback() -> bool:
    """Make a local cluster this process starts single-node, on loopback (unless the user set
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` to something else than ``0``: that is the opt-out). True if Ray
    will start it so; False (logged once, with the reason) where only the environment variable could be
    set, which an already imported Ray does not read again."""
    os.environ.setdefault(SINGLE_NODE_VARIABLE, "0")
    if os.environ[SINGLE_NODE_VARIABLE] != "0":
        return False
    why = SINGLE_NODE.problem(versions())
    if why is None:
        try:
            constants = importlib.import_module(CONSTANTS_MODULE)
            if not hasattr(constants, CLUSTER_SWITCH):
                raise AttributeError(f"{CONSTANTS_MODULE} has no {CLUSTER_SWITCH}")
            setattr(constants, CLUSTER_SWITCH, False)  # read again when Ray starts a node
            return True
        except (ImportError, AttributeError) as error:
            why = f"{type(error).__name__}: {error}"
    _tell_once(why)
    return False


@functools.cache
def _tell_once(why: str) -> None:
    log.warning(NOT_LOOPBACK.format(why=why))
