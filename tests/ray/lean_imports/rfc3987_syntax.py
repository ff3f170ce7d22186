"""Put first on a Ray process's path by the Ray tests and ``bench/ray_children.py``: leaves this optional module out.

Why: ``import ray`` imports ``jsonschema`` (Ray's runtime-env schemas), which imports ``rfc3987_syntax``
when it is installed (``jsonschema[format-nongpl]``, pulled in by Jupyter), and that module builds an
Earley grammar at import: ~2.5 s of CPU in *every* Ray process (driver, raylet agents, each worker),
enough on a busy 2-core machine for a node's dashboard agent to miss the raylet's 15 s start deadline
("Timed out waiting for file .../metrics_agent_port_..."). ``jsonschema`` treats the module as optional
(it only checks the ``iri`` formats with it), so raising ImportError here changes nothing Ray or toh_nb uses.
"""

raise ImportError("rfc3987_syntax is left out of this Ray process (tests/ray/lean_imports)")
