"""The notebook layer: the sync facade (``toh_nb.Hub`` on the portal loop thread), DataFrames of the
hub's tables, rich displays and widgets. The only part of toh_nb that imports pandas or ipywidgets.

- :mod:`toh_nb.notebook.portal` — the persistent event-loop thread every sync call is submitted to;
- :mod:`toh_nb.notebook.hub` — ``Hub``, ``Job``, ``Child``: sync twins of the async face;
- :mod:`toh_nb.notebook.tables` — ``jobs_frame``, ``agents_frame``, ``transcript_frame``, ``events_frame``;
- :mod:`toh_nb.notebook.display` — deterministic ``text/plain`` reprs, short ids, the send receipt;
- :mod:`toh_nb.notebook.interrupts` — what a kernel interrupt during a blocking call says;
- :mod:`toh_nb.notebook.progress` — the progress line of waits, runs and foreground spawns;
- :mod:`toh_nb.notebook.treeview` — the tree as rows, and its static text/HTML snapshots;
- :mod:`toh_nb.notebook.graph` — ``hub.graph()``, the tree as a Mermaid diagram;
- :mod:`toh_nb.notebook.chat` — a transcript as a conversation (chat view, Markdown export);
- :mod:`toh_nb.notebook.widget` — the live agent-tree widget (``hub.tree()``, one anywidget model;
  its renderer is ``tree.js``).
"""
