"""Storage: requests, events and traces; threads; LangGraph savers; migrations; retention; checkpoints."""
