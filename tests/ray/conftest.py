"""One local Ray cluster for the whole test session (started here, shut down after).

Every test of this directory is skipped with a reason when Ray is not installed (``pip install -e
'.[ray]'``; ``.ci/run`` installs it), also one that runs a host class in-process without the cluster: the
guard is an autouse fixture here, so a new test cannot forget it.
The cluster listens on 127.0.0.1 only; its workers get the repository on their path so they import
this checkout's ``toh_nb`` and ``tests.ray.scripts``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
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
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()
