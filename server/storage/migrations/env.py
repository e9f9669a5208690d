"""Alembic environment: migrations run on the connection ``phasegraph.server.storage.migrate`` hands over."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    render_as_batch=True,  # batch: SQLite ALTERs recreate tables
    version_table=context.config.attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
