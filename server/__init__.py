"""The server layer, by job.

``app`` builds the FastAPI app, ``http`` holds the routes, ``runs`` the run engine, ``storage`` the
database, ``cli`` the ``phasegraph`` command. Depends on graphs, never the reverse.
"""
