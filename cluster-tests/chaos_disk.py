"""The disk faults (ComposeCluster.disk_full, disk_clear; the nemesis kind disk-full).

A chaos node runs with its test faults enabled (WARREN_ENABLE_TEST_FAULTS in
docker-compose.chaos.yml), so its HTTP API can arm errors in its own stores
(`/api/cluster/test/disk_fault`, storage/faults.py): "a full disk" arms ENOSPC on every
store the node writes (the classic message store, the Raft log of the metadata and the
quorum queues, the stream segments), on every write or on every fsync, until cleared. The
node is to raise its disk alarm (which holds publishers cluster-wide), keep serving reads
and lose nothing confirmed once there is room again (docs/chaos.md, "A node's own full
disk").

Why hooks and not a real full filesystem: a node's data is on a Docker volume so that kill -9
and a restart keep it, as a real disk does; a tmpfs small enough to fill would be emptied by
every container restart (the kill9 kind). A real filesystem filled and freed under a quorum
queue is tests/node/ops/test_raft_log_full.py's (a 96 MiB tmpfs, local processes).
"""

from __future__ import annotations

import time
from typing import Any

ALARM_WAIT = 3.0  # seconds the fault waits to see the node's disk alarm (recorded, not required)
STORES = ("messages", "raft", "stream")  # what the fault fills: every store of the node
PATH = "/api/cluster/test/disk_fault"


class DiskFaults:
    """ComposeCluster's disk faults (its `http`, `_nemesis` and `disks`), each recorded in the
    history as process "nemesis"; the clear records how many writes or fsyncs have failed on
    the node so far, per store (`fired`, counted since the node started)."""

    disks: dict[str, str]  # node -> the op that fails ("write" or "fsync") until cleared
    http: Any
    _nemesis: Any

    def disk_full(self, node: str, op: str) -> None:
        """Every `op` ("write" or "fsync") of every store of `node` fails with ENOSPC until
        disk_clear."""
        with self._nemesis("disk-full", {"node": node, "op": op}, node) as recorded:
            self.disks[node] = op
            for store in STORES:
                self.http(node, "POST", PATH, {"store": store, "op": op, "error": "ENOSPC", "count": None})
            recorded.ok(alarm=self._disk_alarm(node))

    def _disk_alarm(self, node: str, timeout: float = ALARM_WAIT) -> bool:
        """Whether `node` reports its disk alarm within `timeout` (its alarm check runs once a
        second; the next write of any store meets the full disk)."""
        deadline = time.monotonic() + timeout
        while True:
            nodes = self.http(node, "GET", "/api/nodes")
            if any(n.get("disk_free_alarm") for n in nodes if n.get("name") == f"warren@{node}"):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def disk_clear(self, node: str) -> None:
        """Room again on `node`'s disk: its armed faults cleared."""
        with self._nemesis("disk-clear", {"node": node, "was": self.disks.get(node)}, node) as op:
            faults = self.http(node, "DELETE", PATH)
            self.disks.pop(node, None)
            op.ok(fired=faults.get("fired", {}))
