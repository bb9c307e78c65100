"""The metadata group's machine: records routed by kind to the machines it hosts.

    "metadata.*"  -> MetadataMachine (metadata/machine.py)
    "cluster.*"   -> KeyValueMachine (node/cluster/kv.py), the cluster tests'
                     probe, hosted only by a node run with --enable-test-faults

Anything else applies to nothing (None). The snapshot is a versioned
envelope [format, key-value snapshot, metadata snapshot]; a node without the
probe writes an empty probe's snapshot in its slot, so every node writes the
bytes this format always had and any version reads them.

`announce_member` runs beside the Cluster: once the group has a leader it
proposes this node's AddMember (metadata/feature_flags.py `local_member`:
its version and supported flags), again on every start, and again whenever
the replicated record stops matching (a reset by join_cluster, say).
`local_flags` is the registry this node reports; with --enable-test-faults,
WARREN_TEST_UNSUPPORTED_FLAGS=a,b makes it report flags a and b unsupported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from amqp import codec
from metadata.feature_flags import FLAGS, FeatureFlagRegistry, local_member
from metadata.machine import MetadataMachine
from node import __version__
from node.cluster.cluster import ClusterError
from node.cluster.kv import KeyValueMachine
from raft import records

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

__all__ = ["ClusterMachine", "announce_member", "local_flags"]

log = logging.getLogger("warren.cluster")

UNSUPPORTED_FLAGS_ENV = "WARREN_TEST_UNSUPPORTED_FLAGS"


_NO_KV = KeyValueMachine().snapshot()  # the probe's slot of a node that does not host it


class ClusterMachine:
    SNAPSHOT_FORMAT = 1

    def __init__(self, metadata: MetadataMachine | None = None, kv: KeyValueMachine | None = None) -> None:
        self.metadata = metadata if metadata is not None else MetadataMachine()
        self.kv = kv  # the tests' probe, or None

    def apply(self, record: Any, index: int) -> Any:
        try:
            kind = records.kind_of(record)[0]
        except Exception:
            return None
        if kind.startswith("metadata."):
            return self.metadata.apply(record, index)
        if kind.startswith("cluster.") and self.kv is not None:
            return self.kv.apply(record, index)
        return None

    def snapshot(self) -> bytes:
        kv = self.kv.snapshot() if self.kv is not None else _NO_KV
        return codec.dumps([self.SNAPSHOT_FORMAT, kv, self.metadata.snapshot()])

    def restore(self, data: bytes) -> None:
        fmt, kv, metadata = codec.loads(data)
        if fmt != self.SNAPSHOT_FORMAT:
            raise ValueError(f"cluster machine snapshot format {fmt}, this Warren reads {self.SNAPSHOT_FORMAT}")
        if self.kv is not None:
            self.kv.restore(bytes(kv))
        self.metadata.restore(bytes(metadata))


def local_flags(enable_test_faults: bool = False, env: Mapping[str, str] = os.environ) -> FeatureFlagRegistry:
    """The flags this node reports supported (the test knob may take some away)."""
    if not enable_test_faults:
        return FLAGS
    off = {n.strip() for n in env.get(UNSUPPORTED_FLAGS_ENV, "").split(",") if n.strip()}
    if not off:
        return FLAGS
    log.warning("test knob %s: reporting %s as unsupported", UNSUPPORTED_FLAGS_ENV, ",".join(sorted(off)))
    flags = [dataclasses.replace(f, supported=False) if f.name in off else f for f in FLAGS]
    return FeatureFlagRegistry(flags)


async def announce_member(cluster: Cluster, machine: ClusterMachine, registry: FeatureFlagRegistry = FLAGS,
                          version: str = __version__, interval: float = 0.25) -> None:  # fmt: skip
    """Keep this node's member record (version, supported flags) in the metadata; runs until cancelled."""
    want = (version, registry.supported())
    announced = False
    refused_logged = False
    while True:
        group = cluster.group
        mine = machine.metadata.state.members.get(cluster.node_id)
        stale = mine is None or (mine.version, tuple(mine.supported_flags)) != want
        if (not announced or stale) and group is not None and group.leader_id is not None:
            try:
                result = await cluster.propose(local_member(cluster.node_id, version, registry))
            except ClusterError as e:
                log.debug("announcing this member failed, will retry: %s", e)
            else:
                if getattr(result, "ok", False):
                    announced, refused_logged = True, False
                    log.info("member %s announced: version %s, feature flags %s", cluster.node_id, want[0],
                             ",".join(want[1]) or "(none)")  # fmt: skip
                elif not refused_logged:
                    refused_logged = True
                    log.error("the cluster refused this member: %s", getattr(result, "description", result))
        await asyncio.sleep(interval if not refused_logged else max(interval, 2.0))
