"""What a quorum queue replica needs of its node (node/vhosts/quorum_groups.py)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["QuorumHost"]


class QuorumHost(Protocol):
    node_id: str
    incarnation: str  # node_id#boot: consumers of an earlier life are recognisable

    def submit(self, group: str, record: Any, callback: Any = None) -> bool: ...

    def packs_publishes(self) -> bool:
        """Every member reads commands.PublishBatch (its feature flag is enabled)."""

    def is_leader(self, group: str) -> bool: ...

    def leader_of(self, group: str) -> str | None: ...

    def put_blob(self, group: str, key: bytes, value: bytes) -> None: ...

    def put_blobs(self, group: str, items: list[tuple[bytes, bytes]]) -> None:
        """`put_blob` of each (key, value), in order (a batch's bodies and its mark)."""

    def get_blob(self, group: str, key: bytes) -> bytes | None: ...

    def get_blobs_from(self, group: str, key: bytes, count: int) -> list[tuple[bytes, bytes]]:
        """Up to `count` flushed (key, value) blobs from `key` on, keys of the same length."""

    def delete_blobs(self, group: str, below: bytes | None = None) -> None: ...

    def sync(self) -> None: ...

    def after_durable(self, fn: Any) -> None: ...

    def call_soon(self, fn: Any) -> None: ...

    def priorities(self) -> bool:
        """Every member reads message priorities (feature flag quorum_queue_priorities):
        publishes may be proposed as commands.PublishPrioritised."""

    def consumer_lease(self) -> int:
        """At most how many messages a follower holds for a consumer beyond its credit
        (credit_lease.py, setting quorum_consumer_lease); 0: none."""

    def consumer_timeout(self) -> int | None:
        """The node setting consumer_timeout (ms; 0: none), the timeout of queues that set
        none; None while feature flag quorum_consumer_timeout is off (ticks.py)."""

    def tick_clock(self) -> bool:
        """Every member reads commands.TickClock (feature flag quorum_tick_clock)."""

    def fetch_bodies(self, group: str, mids: list[int], callback: Any) -> None:
        """Ask the other members for these stored messages; `callback(found, mids)`."""
