"""Nodes, routers, state, context and prompts of the triggered-phase protocol (seed 000)."""
