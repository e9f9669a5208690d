"""Node functions, routers and the shared contracts they need (state, context, events, models)."""
