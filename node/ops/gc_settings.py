"""The cyclic garbage collector's settings a node applies to itself once started.

A busy node allocates some dozens of container objects per message (frames,
deliveries, queue and Raft records, callbacks), nearly all freed by reference
counting within a loop turn. With Python's default first-generation threshold
(700 allocations) that is a young collection every few dozen messages, and a
full one, which walks every tracked object including everything the node set
up at start, every hundred or so young ones. Measured on the leader of a
one-replica quorum queue at 1 KB (docs/benchmarks.md, "Quorum queues with 1
replica, 1 KB"): about a tenth of the loop's CPU went to the collector, and
each full collection paused it for tens of milliseconds.

So, once the node is up: the objects start-up made (modules, configuration,
the broker's long-lived parts) are frozen, which full collections then skip,
and the first generation is collected every `gen0_threshold` allocations.
Garbage in reference cycles waits a little longer to be freed; what is
frozen is never collected (it lives as long as the process anyway).
"""

from __future__ import annotations

import gc

__all__ = ["apply_gc_settings"]


def apply_gc_settings(gen0_threshold: int) -> dict:
    """Freeze what exists now and set the first generation's threshold; what was
    applied (empty: `gen0_threshold` 0 keeps Python's defaults)."""
    if gen0_threshold <= 0:
        return {}
    gc.collect()  # the start-up garbage goes before the rest is frozen
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(gen0_threshold, older, oldest)
    return {"gen0_threshold": gen0_threshold, "frozen_objects": gc.get_freeze_count()}
