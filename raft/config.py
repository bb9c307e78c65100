"""pysyncobj configuration for Warren's Raft groups.

`make_conf(data_dir, journal)` is the one place Warren builds a SyncObjConf.
What it sets, and why (pysyncobj/config.py documents every field):

- autoTick=False: the node's asyncio loop drives every group with doTick(0)
  and then flushes the node's DurableLog once (raft/journal.py); pysyncobj
  starts no thread.
- The journal is a `raft.journal.RaftJournal`, passed in `journalFile`
  (raft/patches.py's `install()`, which every SafeSyncObj runs, makes
  pysyncobj's createJournal return it), and the
  snapshot is `<data_dir>/snapshot`. A journal without a snapshot file is
  refused (`check_conf`): pysyncobj then compacts into memory only, and
  after a restart the journal starts past lastApplied and no command is
  applied again.
- Timing: heartbeats every 100 ms, elections after 0.5-1.0 s of silence (etcd
  uses 100 ms / 1 s), and a leader that hears from no majority for 1.5 s
  steps down (leaderFallbackTimeout; stock is 30 s, during which a
  partitioned leader keeps taking commands that cannot commit).
- dynamicMembershipChange=True (nodes join and leave at run time);
  appendEntriesUseBatch=True (throughput over single-command latency).
- appendEntriesBatchSizeBytes 1 MiB: an entry at least this big goes through
  pysyncobj's chunked 'transmission' path, which is slower and pickled.
- commandsQueueSize 20,000: the proposals buffered before QUEUE_FULL pushes
  back on the caller.
- commandsWaitLeader=False: with no leader a proposal fails at once
  (MISSING_LEADER) and the caller retries until its own deadline. Stock
  pysyncobj keeps it queued until a leader appears, so a write a cut-off
  node had already answered with 503 would be applied after the heal.
- useFork=False: the snapshot is written on the loop thread; forking a
  process that runs RocksDB and gRPC threads is not safe.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pysyncobj import SyncObjConf

if TYPE_CHECKING:
    from raft.journal import RaftJournal

__all__ = ["SNAPSHOT_FILE", "RaftConfigError", "check_conf", "make_conf"]

SNAPSHOT_FILE = "snapshot"
APPLY_BYTES = 4 << 20  # command bytes applied per tick (raft/patches.py, patch 10)

DEFAULTS: dict[str, Any] = {
    "autoTick": False,
    "dynamicMembershipChange": True,
    "appendEntriesPeriod": 0.1,
    "raftMinTimeout": 0.5,
    "raftMaxTimeout": 1.0,
    "leaderFallbackTimeout": 1.5,
    "connectionTimeout": 2.0,
    "connectionRetryTime": 0.5,
    "appendEntriesUseBatch": True,
    "appendEntriesBatchSizeBytes": 1 << 20,
    "logCompactionBatchSize": 1 << 20,
    "commandsQueueSize": 20_000,
    "commandsWaitLeader": False,
    "logCompactionMinEntries": 5000,
    "logCompactionMinTime": 300,
    "useFork": False,
}


class RaftConfigError(ValueError):
    """A Raft group configuration that would lose or stall data."""


def check_conf(conf: SyncObjConf | None) -> None:
    """Raise RaftConfigError for a configuration Warren must not run with."""
    if conf is None:
        return
    if conf.journalFile is not None and conf.fullDumpFile is None:
        raise RaftConfigError(
            "a Raft journal needs a snapshot file (fullDumpFile): without one pysyncobj compacts"
            " the journal into memory only and stops applying commands after a restart"
        )


def make_conf(
    data_dir: str | os.PathLike[str] | None,
    journal: RaftJournal | None,
    heartbeat_period: float | None = None,
    compaction_bytes: int | None = None,
    apply_bytes: int | None = APPLY_BYTES,
    **overrides: Any,
) -> SyncObjConf:
    """The SyncObjConf of one Raft group.

    `data_dir` is the group's own directory (created if missing; it holds the
    snapshot file); `journal` comes from the node's DurableLog. Both None
    gives an in-memory group (tests only). `overrides` are SyncObjConf fields.
    `heartbeat_period`: a group whose followers also hear their leader's node
    (node/cluster/liveness.py) may heartbeat more rarely than appendEntriesPeriod
    (which pysyncobj's validate() keeps under a third of raftMinTimeout);
    `SafeSyncObj` applies it (raft/patches.py, patch 7). `compaction_bytes`:
    compact also once the log holds more command bytes than this (patch 8).
    `apply_bytes`: a tick applies committed entries up to this many command
    bytes, the rest in the next ticks (patch 10; None: all at once).
    """
    fields = dict(DEFAULTS)
    if data_dir is not None:
        os.makedirs(data_dir, exist_ok=True)
        fields["fullDumpFile"] = os.path.join(os.fspath(data_dir), SNAPSHOT_FILE)
    fields["journalFile"] = journal
    fields.update(overrides)
    conf = SyncObjConf(**fields)
    check_conf(conf)
    conf.validate()
    if heartbeat_period is not None and not 0 < heartbeat_period < conf.leaderFallbackTimeout:
        raise RaftConfigError(f"heartbeat period {heartbeat_period} s: above 0 and below the leader fallback")
    conf.warren_heartbeat_period = heartbeat_period
    conf.warren_compaction_bytes = compaction_bytes
    conf.warren_apply_bytes = apply_bytes
    return conf
