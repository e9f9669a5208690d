"""The app ``phasegraph serve`` hands uvicorn (each worker process imports it): built without collections.

``phasegraph.server.app:app`` is the same app; this module only imports it with the garbage collector
paused (``phasegraph.server.collector``), which cuts the CPU of every server start.
"""

from phasegraph.server.collector import collector_paused

with collector_paused():
    from phasegraph.server.app import app

__all__ = ["app"]
