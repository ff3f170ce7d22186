"""One local Ray cluster for the whole test session (started here, shut down after).

Every test of this directory is skipped with a reason when Ray is not installed (``pip install -e
'.[ray]'``; ``.ci/run`` installs it), also one that runs a host class in-process without the cluster: the
guard is an autouse fixture here, so a new test cannot forget it.
The cluster listens on 127.0.0.1 only; its workers get the repository on their path so they import
this checkout's ``toh_nb`` and ``tests.ray.scripts``, and skip a module that costs seconds per process
(``lean_imports``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
LEAN_IMPORTS = str(Path(__file__).resolve().parent / "lean_imports")
NO_RAY = "Ray is not installed: pip install -e '.[ray]' to run the Ray tests"


@pytest.fixture(autouse=True)
def _needs_ray():
    """Skip (with the reason) every Ray test where the ``ray`` extra is missing."""
    pytest.importorskip("ray", reason=NO_RAY)


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray", reason=NO_RAY)
    from toh_nb.providers.ray.pool import loopback_only

    loopback_only()
    path = ray_path()
    with environment(PYTHONPATH=path):  # the raylet and its agents inherit it; workers get runtime_env
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


def ray_path() -> str:
    """The path of this checkout's Ray processes: ``lean_imports`` first (its module says why), then the
    repository, then this process's ``PYTHONPATH``."""
    return os.pathsep.join(p for p in (LEAN_IMPORTS, ROOT, os.environ.get("PYTHONPATH", "")) if p)


@contextlib.contextmanager
def environment(**values: str):
    """Set environment variables for the processes started meanwhile, then restore them."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
