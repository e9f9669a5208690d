"""Live events from memory: each committed event is handed to this replica's followers of its request.

A follower subscribes *before* it reads the stored log, so every event committed after its read
reaches its queue, and it skips what it already replayed by ``seq``. Queues are bounded: a client
that reads slower than its run writes is dropped to replay mode (it reads the store from where it
was, then subscribes again); it never holds the run up or grows this process's memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from phasegraph.nodes.events import Event

#: Events a subscriber may have waiting before it is dropped to replay mode.
QUEUE_LIMIT = 1_000


class Subscription:
    """One follower's queue of a request's live events."""

    def __init__(self, limit: int = QUEUE_LIMIT) -> None:
        self.limit = limit
        self.events: deque[Event] = deque()
        self.dropped = False  # it fell behind: read the store instead
        self.stale = False  # events may have been committed elsewhere: read the store
        self._signal = asyncio.Event()

    def push(self, events: Iterable[Event]) -> None:
        """Queue events; past the limit, drop them all and fall back to replay."""
        if self.dropped:
            return
        self.events.extend(events)
        if len(self.events) > self.limit:
            self.events.clear()
            self.dropped = True
        self._signal.set()

    def poke(self) -> None:
        """Something changed that the queue does not carry: look at the store."""
        self.stale = True
        self._signal.set()

    async def wait(self, timeout: float | None) -> None:
        """Until events are queued, a poke, or ``timeout`` seconds (``None``: no limit)."""
        if self.events or self.dropped or self.stale:
            return
        self._signal.clear()
        try:
            await asyncio.wait_for(self._signal.wait(), timeout)
        except TimeoutError:
            self.stale = True

    def take(self) -> list[Event]:
        """The queued events, oldest first (the queue is emptied)."""
        taken = list(self.events)
        self.events.clear()
        return taken


class LiveHub:
    """The subscriptions of this replica's followers, per request key."""

    def __init__(self, limit: int = QUEUE_LIMIT) -> None:
        self.limit = limit
        self._subscribers: dict[str, set[Subscription]] = {}
        #: The server is stopping: followers end once they have read the store (``close``).
        self.closed = False

    def subscribe(self, request_key: str) -> Subscription:
        """A new subscription to the request's events from now on."""
        subscription = Subscription(self.limit)
        self._subscribers.setdefault(request_key, set()).add(subscription)
        return subscription

    def unsubscribe(self, request_key: str, subscription: Subscription) -> None:
        """Stop delivering to ``subscription``."""
        subscribers = self._subscribers.get(request_key)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[request_key]

    def publish(self, request_key: str, events: list[Event]) -> None:
        """Hand committed events to every subscriber of their request."""
        for subscription in self._subscribers.get(request_key, ()):
            subscription.push(events)

    def poke(self, request_key: str) -> None:
        """Tell the request's subscribers to read the store (its state moved without local events)."""
        for subscription in self._subscribers.get(request_key, ()):
            subscription.poke()

    def poke_all(self) -> None:
        """Tell every subscriber to read the store (wake-ups from elsewhere may have been missed)."""
        for subscribers in self._subscribers.values():
            for subscription in subscribers:
                subscription.poke()

    def close(self) -> None:
        """The server is stopping: every follower reads the store a last time, then its stream ends."""
        self.closed = True
        self.poke_all()

    def followed(self, request_key: str) -> bool:
        """True when someone here follows the request."""
        return bool(self._subscribers.get(request_key))
