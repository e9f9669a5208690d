"""Nodes, routers, state, context and prompts of the triggered-phase protocol (seed 000).

Every node and router is ``async def``, even one that awaits nothing: in an async run LangGraph
hands a plain function to a worker thread, and that hop cost more than the function itself.
"""
