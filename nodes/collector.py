"""Start-up without the cyclic garbage collector, for a process's one big import.

Importing LangGraph, LangChain, SQLAlchemy, FastAPI and phasegraph, then building the app's routes,
makes hundreds of thousands of objects that live as long as the process; each collection during that
time scans them again and finds almost no garbage (importing the server ran ~450 young and 3 full
collections, 15% of its CPU). What exists at the end is frozen (``gc.freeze``): the first collection
after it would otherwise scan all of it once more, and later full collections would again and again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside; what exists at the end is frozen, then collection resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
