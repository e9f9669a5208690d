"""Schema migrations of the request store (Alembic), applied by ``RequestStore.setup()`` at start-up."""
