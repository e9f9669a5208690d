"""A slow Python tool, named by import path in the tests' project files (``tests.slow_tools:nap``)."""

import asyncio


async def nap(seconds: float) -> str:
    """Wait some seconds, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"
