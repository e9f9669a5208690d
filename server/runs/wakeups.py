"""Replicas on one Postgres wake each other with LISTEN/NOTIFY instead of polling.

Each commit of the event log notifies ``phasegraph_events`` (the writer and each request's last
seq); a pause or cancel request notifies ``phasegraph_control`` (the request key). Every replica
keeps one connection listening on both. While that connection is down, ``listening`` is false and
followers of runs driven elsewhere fall back to a slow poll; once it is back, every follower reads
the store once, in case a wake-up was missed meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from phasegraph.server.storage.records import CONTROL_CHANNEL, EVENTS_CHANNEL

logger = logging.getLogger(__name__)

#: Seconds between attempts to get the listening connection back.
RECONNECT_SECONDS = 1.0


class Dispatcher:
    """What every kind of wake-up does with a message: poke followers, or apply a control request."""

    owner: str
    on_events: Callable[[str], None]
    on_control: Callable[[str], Coroutine[Any, Any, None]]
    listening: bool

    def __init__(
        self,
        owner: str,
        on_events: Callable[[str], None],
        on_control: Callable[[str], Coroutine[Any, Any, None]],
    ) -> None:
        self.owner, self.on_events, self.on_control = owner, on_events, on_control
        self.listening = False
        self._control: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start listening (in the background)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop listening; wait for the control requests being applied."""
        await asyncio.gather(*self._control, return_exceptions=True)

    def _dispatch(self, channel: str, payload: str) -> None:
        if channel == CONTROL_CHANNEL:
            task: asyncio.Task[None] = asyncio.create_task(self.on_control(payload))
            self._control.add(task)
            task.add_done_callback(self._control.discard)
            return
        try:
            message = json.loads(payload)
        except ValueError:
            logger.warning("ignored a malformed notification on %s", channel)
            return
        if message.get("owner") == self.owner:
            return  # our own commit: our followers had it from memory
        for request_key in message.get("heads", {}):
            self.on_events(request_key)


class Wakeups(Dispatcher):
    """Listens for other replicas' commits and control requests (Postgres only)."""

    def __init__(
        self,
        url: str,
        owner: str,
        on_events: Callable[[str], None],
        on_control: Callable[[str], Coroutine[Any, Any, None]],
        on_reconnect: Callable[[], None],
    ) -> None:
        super().__init__(owner, on_events, on_control)
        self.url, self.on_reconnect = url, on_reconnect
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start listening in the background (reconnecting for as long as the app runs)."""
        self._task = asyncio.create_task(self._listen_forever(), name="postgres-wakeups")

    async def close(self) -> None:
        """Stop listening."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await super().close()

    async def _listen_forever(self) -> None:
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {EVENTS_CHANNEL}")
                    await conn.execute(f"LISTEN {CONTROL_CHANNEL}")
                    self.listening = True
                    self.on_reconnect()  # wake-ups sent while nobody listened are lost: look once
                    async for notify in conn.notifies():
                        self._dispatch(notify.channel, notify.payload)
            except (OSError, psycopg.Error) as exc:
                logger.warning(
                    "listening for other replicas failed (%s); polling slowly until it is back", exc
                )
            finally:
                self.listening = False
            await asyncio.sleep(RECONNECT_SECONDS)
