"""The notebook layer: the sync facade (``toh_nb.Hub`` on the portal loop thread), DataFrames of the
hub's tables, rich displays and widgets. The only part of toh_nb that imports pandas or ipywidgets.

- :mod:`toh_nb.notebook.portal` — the persistent event-loop thread every sync call is submitted to;
- :mod:`toh_nb.notebook.hub` — ``Hub``, ``Job``, ``Child``: sync twins of the async face;
- :mod:`toh_nb.notebook.tables` — ``jobs_frame``, ``agents_frame``, ``transcript_frame``, ``events_frame``;
- :mod:`toh_nb.notebook.display` — deterministic ``text/plain`` reprs and ``_repr_html_`` helpers;
- :mod:`toh_nb.notebook.widget` — the live agent-tree widget (``hub.tree()``).
"""
