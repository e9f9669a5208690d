"""Context and middleware of the unified fallback loop (seed 000, on LangChain's ``create_agent``)."""
