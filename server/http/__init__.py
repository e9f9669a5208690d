"""The HTTP surfaces: one router module per surface, and what they share (errors, tokens, SSE)."""
