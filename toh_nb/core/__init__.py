"""The async engine: ids, content, session logs, tools, the Agent and the runtime. No Jupyter here."""
