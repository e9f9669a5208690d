"""Checkpoint pruning for each LangGraph saver: the shared questions (``base``) and one module per backend."""
