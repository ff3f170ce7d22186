"""Tutorials that need an optional extra are not collected where it is missing (``.ci/run`` installs
every extra, so CI runs them all): ``10_ray.ipynb`` needs ``ray`` (``pip install -e '.[ray]'``)."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("ray") else ["10_ray.ipynb"]
