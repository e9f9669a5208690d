"""Pruning ``InMemorySaver``'s dicts: ``storage`` (checkpoints), ``writes`` and ``blobs``.

Like Postgres, a checkpoint names a version of each channel and the value is one ``blobs`` entry
shared by every checkpoint that saw the channel unchanged, so an entry goes once no remaining
checkpoint names it. Each thread is changed in one synchronous step, which no run on the same event
loop can interleave with; nothing here outlives the process, so there is no space to report.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from phasegraph.server.storage.pruning.base import INTERRUPT, NamespaceView, Removed, ThreadView

Saved = dict[str, tuple[tuple[str, bytes], tuple[str, bytes], str | None]]
BlobKey = tuple[str, str, str, str | int | float]  # thread, namespace, channel, version


class MemoryPruner:
    """Prunes one ``InMemorySaver``."""

    keeps_blobs = True

    def __init__(self, saver: InMemorySaver) -> None:
        self.saver = saver

    async def threads(self, after: str | None, limit: int) -> list[str]:
        """Thread ids in order, ``limit`` at a time."""
        ids = sorted(t for t, spaces in self.saver.storage.items() if any(spaces.values()))
        return [t for t in ids if after is None or t > after][:limit]

    async def views(self, thread_ids: list[str], keep: int) -> list[ThreadView]:
        """Each namespace's newest id, its ``keep``-th newest id, count, call root and interrupt."""
        views = []
        for thread_id in thread_ids:
            view = ThreadView(thread_id)
            for name, saved in self.saver.storage.get(thread_id, {}).items():
                if not saved:
                    continue
                ids = sorted(saved, reverse=True)
                ns = view.namespaces[name] = NamespaceView(name, len(ids), ids[0])
                if len(ids) > keep > 0:
                    ns.oldest_kept = ids[keep - 1]
                writes = self.saver.writes.get((thread_id, name, ids[0]), {})
                ns.interrupted = any(w[1] == INTERRUPT for w in writes.values())
                if ns.is_call:
                    metadata = self.saver.serde.loads_typed(saved[ids[0]][1])
                    ns.root = metadata.get("parents", {}).get("")
            if view.namespaces:
                views.append(view)
        return views

    async def trim(self, thread_id: str, namespace: str, below: str | None, dry_run: bool) -> Removed:
        """Remove the namespace's checkpoints older than ``below`` (all when ``None``)."""
        return self._remove(thread_id, namespace, below, dry_run)

    async def expire(self, thread_id: str, cutoff: str, dry_run: bool) -> Removed | None:
        """Remove the whole thread unless it has a checkpoint from ``cutoff`` on."""
        spaces = self.saver.storage.get(thread_id, {})
        if any(checkpoint_id >= cutoff for saved in spaces.values() for checkpoint_id in saved):
            return None
        removed = Removed()
        for namespace in list(spaces):
            removed += self._remove(thread_id, namespace, None, dry_run)
        if not dry_run:
            self.saver.storage.pop(thread_id, None)
        return removed

    async def remove_run(self, thread_id: str, run_id: str) -> Removed:
        """Remove the checkpoints ``run_id`` saved with their writes and the blobs only they named."""
        removed = Removed()
        for ns, saved in list(self.saver.storage.get(thread_id, {}).items()):
            doomed = [i for i, (_, metadata, _) in saved.items() if self._run_of(metadata) == run_id]
            kept = [i for i in saved if i not in doomed]
            freed = self._versions(thread_id, ns, saved, doomed) - self._versions(thread_id, ns, saved, kept)
            for checkpoint_id in doomed:
                del saved[checkpoint_id]
                removed.writes += len(self.saver.writes.pop((thread_id, ns, checkpoint_id), {}))
            for blob in freed:
                del self.saver.blobs[blob]
            removed += Removed(len(doomed), 0, len(freed))
            if not saved:
                self.saver.storage[thread_id].pop(ns, None)
        return removed

    def _run_of(self, metadata: tuple[str, bytes]) -> object:
        """The ``run_id`` a stored checkpoint's metadata names."""
        return self.saver.serde.loads_typed(metadata).get("run_id")

    async def size(self) -> int | None:
        """Nothing to measure: the checkpoints live in this process's memory."""
        return None

    async def compact(self) -> None:
        """Nothing to give back: removed entries are freed with them."""

    def _remove(self, thread_id: str, ns: str, below: str | None, dry_run: bool) -> Removed:
        saved: Saved = self.saver.storage.get(thread_id, {}).get(ns, {})
        doomed = sorted(i for i in saved if below is None or i < below)
        kept = [i for i in saved if below is not None and i >= below]
        freed = self._versions(thread_id, ns, saved, doomed) - self._versions(thread_id, ns, saved, kept)
        writes = [(thread_id, ns, i) for i in doomed if (thread_id, ns, i) in self.saver.writes]
        removed = Removed(len(doomed), sum(len(self.saver.writes[key]) for key in writes), len(freed))
        if dry_run:
            return removed
        for checkpoint_id in doomed:
            del saved[checkpoint_id]
        for key in writes:
            del self.saver.writes[key]
        for blob in freed:
            del self.saver.blobs[blob]
        gone = set(doomed)
        for checkpoint_id, (checkpoint, metadata, parent) in list(saved.items()):
            if parent in gone:  # a kept checkpoint whose parent is gone has none, as LangGraph's prune
                saved[checkpoint_id] = (checkpoint, metadata, None)
        if not saved:
            self.saver.storage.get(thread_id, {}).pop(ns, None)
        return removed

    def _versions(self, thread_id: str, ns: str, saved: Saved, ids: list[str]) -> set[BlobKey]:
        """The ``blobs`` keys the checkpoints ``ids`` name (those that exist)."""
        keys: set[BlobKey] = set()
        for checkpoint_id in ids:
            checkpoint = self.saver.serde.loads_typed(saved[checkpoint_id][0])
            for channel, version in checkpoint["channel_versions"].items():
                keys.add((thread_id, ns, channel, version))
        return {key for key in keys if key in self.saver.blobs}
