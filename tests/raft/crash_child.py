"""Child process for test_crash.py: a 3-member cluster that commits until it is killed.

    python crash_child.py KIND ROOT REPORT MODE FIRST_VALUE SEED

KIND is "ours" or "stock" (raft_harness kinds). MODE is "run" (the parent
kills us at a random moment), or "kill-in-compaction" / "kill-after-snapshot"
(we SIGKILL ourselves inside the K-th journal compaction / right after the
K-th snapshot rename). Every step appends to REPORT, with os.write so a kill
loses nothing already reported:

    R                 the cluster has a leader (the parent may start its clock)
    C <value>         the leader confirmed <value> committed
    A <node> <index>  <node> sent an ack for its log up to <index>, or (after
                      each step) counts itself, as leader, for it

written the moment the confirmation or the ack leaves.
"""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pysyncobj import journal as stock_journal  # noqa: E402
from pysyncobj import serializer as stock_serializer  # noqa: E402
from raft_harness import Cluster  # noqa: E402

from raft import patches  # noqa: E402
from raft.journal import RaftJournal  # noqa: E402
from raft.status import ProposalOutcome  # noqa: E402

COMPACT_EVERY = {"logCompactionMinEntries": 20}


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_hook(kind: str, mode: str, rng: random.Random) -> None:
    target = rng.randint(3, 12) if mode == "kill-in-compaction" else rng.randint(8, 30)
    calls = [0]

    if mode == "kill-in-compaction" and kind == "ours":
        real = RaftJournal.deleteEntriesTo

        def delete_to(self, n):
            real(self, n)
            calls[0] += 1
            if calls[0] == target:
                die()  # the range delete is buffered, not flushed

        RaftJournal.deleteEntriesTo = delete_to
    elif mode == "kill-in-compaction" and kind == "stock":

        def delete_to(self, n):
            # pysyncobj's FileJournal.deleteEntriesTo, killed halfway
            keep = self._FileJournal__journal[n:]
            self.clear()
            calls[0] += 1
            for i, entry in enumerate(keep):
                if calls[0] == target and i == len(keep) // 2:
                    die()
                self.add(*entry)

        stock_journal.FileJournal.deleteEntriesTo = delete_to
    elif mode == "kill-after-snapshot":
        real_replace = stock_serializer.atomicReplace

        def replace(a, b):
            real_replace(a, b)
            calls[0] += 1
            if calls[0] == target:
                die()  # snapshot in place, journal not yet compacted

        stock_serializer.atomicReplace = replace


def main() -> None:
    kind, root, report, mode, first, seed = sys.argv[1:7]
    rng = random.Random(int(seed))
    # first, so that the kill hook wraps the durable rename (and no later install replaces it)
    patches.install()
    if mode != "run":
        install_kill_hook(kind, mode, rng)
    fd = os.open(report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(fd, (line + "\n").encode())  # at once: a kill must not hide it

    cluster = Cluster.start(kind, Path(root), **COMPACT_EVERY)
    claimed: dict[str, int] = {}

    def watch(name: str):
        def on_sent(dst: str, msg: dict) -> None:
            if msg["type"] == "next_node_idx" and msg["success"]:
                idx = msg["next_node_idx"] - 1
                if idx > claimed.get(name, 0):
                    claimed[name] = idx
                    say(f"A {name} {idx}")

        return on_sent

    for m in cluster.members:
        m.transport.on_sent = watch(m.name)
    value = int(first)
    ready = False
    while True:
        leader = cluster.leader()
        if leader is not None:
            if not ready:
                ready = True
                say("R")
            for _ in range(rng.randint(1, 8)):
                value += 1
                leader.propose(value, callback=lambda res, err, v=value: err is ProposalOutcome.SUCCESS and say(f"C {v}"))
        cluster.step()
        for m in cluster.members:
            del m.transport.sent[:]  # keep memory flat
            if m.obj._isLeader():  # what the leader counts itself for
                log = m.raft_log
                idx = log.durable_index() if isinstance(log, RaftJournal) else m.last_index()
                if idx > claimed.get(m.name, 0):
                    claimed[m.name] = idx
                    say(f"A {m.name} {idx}")


if __name__ == "__main__":
    main()
