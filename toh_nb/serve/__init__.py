"""Faces that serve a hub to another program: ``python -m toh_nb acp`` (:mod:`toh_nb.serve.acp`) serves a
toh_nb hub over stdio as an Agent Client Protocol agent, so an ACP editor drives a delegation tree."""
