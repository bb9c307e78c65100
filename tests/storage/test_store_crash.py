"""Kill -9 a writer mid-stream: every write it confirmed must survive.

The child puts records through a GroupCommitter and prints a record's seq only
from its durable callback, i.e. after the fsync that covers it, the way the
broker sends `accepted`. The parent waits until the child has confirmed
enough (events read from its stdout, no sleeps), SIGKILLs it while it is still
writing, reopens the database and checks every confirmed seq.

A process kill keeps the OS page cache, so this checks the confirm-after-write
protocol and RocksDB's recovery, not the fsync itself (that needs power loss).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from storage.message_store import MessageStore

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import asyncio, sys
from storage.group_commit import GroupCommitter
from storage.message_store import MessageStore, Record

async def main(path):
    store = MessageStore(path)
    gc = GroupCommitter(store)
    out = sys.stdout
    print("ready", flush=True)
    seq = 0
    turn = 0
    while True:
        turn += 1
        for _ in range(1 + turn % 97):
            seq += 1
            q = "q%d" % (seq % 3)
            t = store.put(q, seq, Record(body=b"payload-%d" % seq, enqueued_at=seq))
            gc.on_durable(t, lambda seq=seq: out.write("%d\n" % seq))
            if seq % 10 == 0:
                # acked and removed: confirmed or not, it may be gone
                store.delete("q%d" % ((seq - 5) % 3), seq - 5)
        if turn % 5 == 0:
            store.update(q, seq, Record(body=b"payload-%d" % seq, enqueued_at=seq, delivery_count=1))
        out.flush()
        if store.pending_seq() - store.durable_seq() > 5000:
            await gc.durable(store.pending_seq() - 2500)
        await asyncio.sleep(0)

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kill_after", [1, 500, 5000])
def test_confirmed_writes_survive_kill_9(tmp_path, kill_after):
    path = tmp_path / "messages"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=env,
    )
    confirmed: list[int] = []
    try:
        assert child.stdout.readline() == b"ready\n", child.stderr.read().decode()
        while len(confirmed) < kill_after:
            line = child.stdout.readline()
            assert line, f"child died early: {child.stderr.read().decode()}"
            confirmed.append(int(line))
        assert child.poll() is None, "child stopped writing before the kill"
        child.send_signal(signal.SIGKILL)
        # Lines already in the pipe were confirmed before the kill too; a
        # torn last line is not counted.
        rest = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    for line in rest.split(b"\n")[:-1]:
        confirmed.append(int(line))
    assert confirmed == sorted(confirmed), "confirmations out of write order"

    with MessageStore(path) as store:
        recovered = store.recover()
    stored = {seq: r for q in recovered.values() for seq, r in q}
    assert set(recovered) <= {"q0", "q1", "q2"}
    # The child deletes every seq ending in 5 (an ack), confirmed or not.
    missing = [seq for seq in confirmed if seq not in stored and seq % 10 != 5]
    assert missing == [], f"{len(missing)} confirmed writes lost, first {missing[:10]}"
    for seq in confirmed:
        if seq in stored:
            assert stored[seq].body == b"payload-%d" % seq
            assert stored[seq].enqueued_at == seq
    # Recovery yields each queue in seq order.
    for msgs in recovered.values():
        seqs = [s for s, _ in msgs]
        assert seqs == sorted(seqs)
