"""The message store under a node's classic queues, and their start from it.

One RocksDB database per process that writes it (a node, or each worker of a
node with several, issue 36), with its group committer. At open it learns
which queues have messages stored and their checkpoints; each such queue,
when the metadata starts it, rebuilds its positions from those
(`recover_queue`); once the metadata is caught up, the stored messages of
queues that no longer exist go (`drop_orphans`)."""

from __future__ import annotations

import asyncio
from typing import Any

from node.config import Config
from queues.classic import ClassicQueue, StorePersistence, classic_queue, payload_size
from queues.classic.persistence import store_key
from storage.faults import DiskFaults
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, queue_chunks

__all__ = ["ClassicStore"]


class ClassicStore:
    def __init__(self, config: Config, directory: str, loop: asyncio.AbstractEventLoop,
                 disk_faults: DiskFaults | None = None) -> None:  # fmt: skip
        self.config = config
        self.store = MessageStore(directory, size_of=payload_size)
        self.store.inject_faults(disk_faults, "messages")  # a full disk is waited out: storage/group_commit.py
        self.committer = GroupCommitter(self.store, loop, retry_full=config.alarm_check_interval)
        self.persistence = StorePersistence(self.store, self.committer)
        self._recovered = set(self.store.indexed_queues())  # a seek per queue: no message is read
        self._positions = self.store.take_positions()  # the queues' checkpoints, each used once

    def make_queue(self, vhost: Any, name: str, durable: bool, exclusive_owner: Any, auto_delete: bool,
                   arguments: dict) -> Any:  # fmt: skip
        # Transient queues use the store too: their messages behind the memory
        # window are paged out (and their page copies dropped at restart).
        cfg = self.config
        window, window_bytes = cfg.classic_queue_memory_window, cfg.classic_queue_memory_bytes
        return classic_queue(vhost.name, name, durable, exclusive_owner, auto_delete, arguments, host=vhost,
                            persistence=self.persistence, memory_window=window if window >= 0 else None,
                            memory_bytes=window_bytes if window_bytes >= 0 else None,
                            checkpoint_every=cfg.classic_queue_checkpoint_every,
                            consumer_timeout=cfg.consumer_timeout)  # fmt: skip

    def holds(self, vhost: str, name: str) -> bool:
        """Whether this store holds messages of the queue that it has not started yet."""
        return store_key(vhost, name) in self._recovered

    def recover_queue(self, queue: Any) -> None:
        """Hands a starting queue its checkpoint, if the store kept one, to
        rebuild its positions from that and the store's index (its bodies are
        read when delivered)."""
        key = getattr(queue, "store_key", None)
        if key in self._recovered:
            self._recovered.discard(key)
            queue.recover_stored(self._positions.pop(key, None))

    async def adopt(self, directory: str, key: str) -> int:
        """Copy the stored messages of queue `key` from the store in `directory`, which no
        process writes any longer (a lost worker's, node/workers/lost_workers.py), into this
        one, synced, before the queue starts here (`recover_queue` then rebuilds it from the
        index); returns the keys copied. Reads run on a thread; at most one chunk is in memory."""
        chunks = queue_chunks(directory, key)
        copied, ticket = 0, self.store.delete_queue(key)  # in place of a stale copy an earlier move left
        try:
            while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                ticket = self.store.put_copied(chunk)
                copied += len(chunk)
        finally:
            await asyncio.to_thread(chunks.close)
        await self.committer.durable(ticket)
        self._positions.pop(key, None)  # a checkpoint of that stale copy
        if copied:
            self._recovered.add(key)
        else:
            self._recovered.discard(key)
        return copied

    def drop_orphans(self) -> None:
        """Once the metadata is caught up: the stored messages of queues that no longer exist go."""
        for orphan in self._recovered:
            self.store.delete_queue(orphan)
        self._recovered = set()
        self._positions = {}

    async def close(self, vhosts: dict) -> None:
        """A clean shutdown leaves each durable classic queue's checkpoint as
        it is at the end, so the next start reads next to none of the index."""
        if not self.store.closed:
            for vhost in vhosts.values():
                for queue in vhost.queues.values():
                    if isinstance(queue, ClassicQueue):
                        queue.write_checkpoint()
        await self.committer.close()
        self.store.close()
