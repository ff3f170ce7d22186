"""Providers: the ways a child agent comes to exist (``tn.Hub(providers={"name": provider})``).

A provider author reads two files: :mod:`toh_nb.providers.base` (the ``Provider`` protocol, the
``ChildPlan`` a provider returns, its optional abilities) and :mod:`toh_nb.core.steps` (the turn's step
loop, for a provider whose children's steps run elsewhere). The providers shipped here:

- :mod:`toh_nb.providers.local`: ``spawn`` and ``fork``, in-process;
- :mod:`toh_nb.providers.acp`: external coding agents over the Agent Client Protocol (extra ``acp``);
- :mod:`toh_nb.providers.ray`: children whose steps run on a Ray cluster (extra ``ray``).

Importing this package imports neither the ACP SDK nor Ray.
"""
