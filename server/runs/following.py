"""Following a request's events: the stored ones, then live ones, with no gap and no repeat.

Any replica can serve any request's stream: followers of a run driven here are handed each
committed batch in memory; followers on other replicas read the store when Postgres notifies them
(or poll it slowly when nothing can), and a client reconnecting with ``Last-Event-ID`` replays the
store and then joins the live queue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from phasegraph.nodes.events import Cancelled, ErrorEvent, Event, Final, Paused
from phasegraph.server.runs.engine import Engine, ServerStopping
from phasegraph.server.storage.records import RequestRecord

#: How often a follower reads the store when nothing can wake it (no listening connection to Postgres).
SLOW_POLL_SECONDS = 1.0
#: Events after which a follower's stream ends: the run stopped (a resume is a new stream).
STOPS = (Final, ErrorEvent, Cancelled, Paused)


class Followers:
    """Streams of requests' events, for clients on this replica."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def follow(self, record: RequestRecord, after_seq: int = 0) -> AsyncIterator[Event]:
        """Every event after ``after_seq``: the stored ones, then live ones until the run stops.

        Raises ``ServerStopping`` when this server stops before the run does (another drives it).
        The subscription starts before the store is read, so an event committed meanwhile is in
        one or the other (or both: ``seq`` drops the repeat). A follower dropped for reading too
        slowly, or woken by another replica's commit, reads the store from where it was.
        """
        key = record.request_key
        fresh = self.engine.fresh.pop(key, None) if after_seq == 0 else None
        subscription = fresh or self.engine.hub.subscribe(key)
        try:
            from_store, first = fresh is None, True
            while True:
                if subscription.dropped:
                    self.engine.hub.unsubscribe(key, subscription)
                    subscription = self.engine.hub.subscribe(key)
                    from_store = True
                if from_store or subscription.stale:
                    subscription.stale = False
                    events = await self.engine.store.events_after(key, after_seq)
                else:
                    events = subscription.take()
                from_store = False
                for event in events:
                    if event.seq <= after_seq:
                        continue  # replayed already
                    if event.seq > after_seq + 1:  # committed before this subscription: in the store
                        from_store = True
                        break
                    after_seq = event.seq
                    yield event
                    if isinstance(event, STOPS) and event is events[-1]:
                        return  # the run stopped (a stop followed by more was paused, then resumed)
                if first and not events and record.status != "running":
                    return  # nothing after ``after_seq`` and nothing more to come
                first = False
                if not from_store:
                    if self.engine.hub.closed:  # what the store held is sent; the rest is elsewhere's
                        raise ServerStopping(
                            f"this server is stopping; request {record.request_id!r} goes on where it "
                            "runs: follow it again (Last-Event-ID)"
                        )
                    await subscription.wait(self._poll_interval(key))
        finally:
            self.engine.hub.unsubscribe(key, subscription)

    def _poll_interval(self, request_key: str) -> float | None:
        """How long a follower may wait without reading the store (``None``: until woken)."""
        engine = self.engine
        if request_key in engine.local or (engine.wakeups is not None and engine.wakeups.listening):
            return None
        return SLOW_POLL_SECONDS
