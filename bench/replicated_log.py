"""Why streams are not a Raft group each: the same messages through stream
replication (a leader and two replicas, queues/stream/leader.py and
replica.py) and through a 3-member Raft group of this repository's stack
(RaftGroup + DurableLog, group-commit fsync, as a quorum queue's log), all
in one process with messages serialised between members (not a test).

    PYTHONPATH=. .venv/bin/python bench/replicated_log.py [N] [BODY_BYTES]

Rows: stream replication publish-to-confirm (a majority fsynced); Raft with
one entry per message (what a quorum queue does); Raft with one entry per
chunk of up to 4096 messages (the best a per-stream group could do, its
log then being a second copy of every chunk beside the segment files).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "raft"))  # raft_harness

from raft_harness import Cluster  # noqa: E402
from stream_host import Host  # noqa: E402

from amqp.message import Message  # noqa: E402
from queues.base import QueueMessage  # noqa: E402
from queues.stream import wire  # noqa: E402
from queues.stream.config import StreamConfig  # noqa: E402
from queues.stream.leader import StreamLeader  # noqa: E402
from queues.stream.queue import StreamQueue  # noqa: E402
from queues.stream.replica import StreamReplica  # noqa: E402
from raft.records import command  # noqa: E402


@command("bench.stream_append", version=1)
@dataclass(frozen=True)
class AppendChunk:
    value: int  # what the harness's machine keeps
    body: bytes


async def stream_rate(n: int, body: bytes) -> float:
    loop = asyncio.get_running_loop()
    with tempfile.TemporaryDirectory() as d:
        nodes: dict[str, object] = {}

        def sender(me: str):
            def send(peer: str, message: object) -> None:
                data = wire.encode(message)
                loop.call_soon(deliver, me, peer, data)

            return send

        def deliver(me: str, peer: str, data: bytes) -> None:
            msg = wire.decode(data)
            target = nodes[peer]
            if isinstance(msg, wire.Fetch):
                target.role.on_fetch(me, msg)
            elif isinstance(msg, wire.Chunks):
                target.on_chunks(msg)
            elif isinstance(msg, wire.Truncate):
                target.on_truncate(msg)

        queue = StreamQueue("/", "s", {}, f"{d}/a", Host(), loop)
        queue.role = StreamLeader(queue, "a", 1, ("a", "b", "c"), sender("a"))
        queue.committed_end = 0
        nodes["a"] = queue
        for name in ("b", "c"):
            nodes[name] = StreamReplica("/", "s", f"{d}/{name}", StreamConfig(), "a", 1, sender(name), loop)
            nodes[name].fetch()
        payload = Message.build(body).payload
        done = asyncio.Event()
        confirmed = [0]

        def confirm(outcome) -> None:
            confirmed[0] += 1
            if confirmed[0] == n:
                done.set()

        t = time.perf_counter()
        window, sent = 20_000, 0
        while sent < n:
            while sent < n and sent - confirmed[0] < window:
                queue.publish(QueueMessage(sent, payload, True, None, 0, False, "", ["s"]), confirm)
                sent += 1
            await asyncio.sleep(0)
        await done.wait()
        dt = time.perf_counter() - t
        queue.close()
        for name in ("b", "c"):
            nodes[name].close()
        return n / dt


def raft_rate(n: int, body: bytes, per_entry: int) -> float:
    root = Path(tempfile.mkdtemp(prefix="warren-replicated-log-bench-"))
    c = Cluster.start("ours", root, logCompactionMinEntries=10**9, logCompactionMinTime=10**6,
                      commandsQueueSize=100_000)  # fmt: skip
    try:
        leader = c.wait_leader()
        entries = -(-n // per_entry)
        entry = AppendChunk(0, body * per_entry)
        done = [0]

        def cb(res, err):
            done[0] += 1

        sent = 0
        t = time.perf_counter()
        while done[0] < entries:
            while sent < entries and sent - done[0] < max(1, 5000 // per_entry):
                sent += 1
                leader.obj.propose(entry, callback=cb)
            c.step()
        dt = time.perf_counter() - t
    finally:
        c.destroy()
    return n / dt


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    body = b"x" * (int(sys.argv[2]) if len(sys.argv) > 2 else 100)
    print(f"{n} messages of {len(body)} B, 3 members in one process")
    print(f"stream replication          {asyncio.run(stream_rate(n, body)):9.0f} msg/s confirmed")
    print(f"raft, an entry per message  {raft_rate(n, body, 1):9.0f} msg/s committed")
    print(f"raft, an entry per chunk    {raft_rate(n, body, 4096):9.0f} msg/s committed")


if __name__ == "__main__":
    main()
