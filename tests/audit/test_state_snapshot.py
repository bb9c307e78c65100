"""node/ops/state_snapshot.py: the schema, the writer and its rotation (real files), collect()."""

from __future__ import annotations

import asyncio
import json
import os
import types

import pytest

from audit import schema
from audit.schema import SnapshotSchemaError, read_records, snapshot_files, validate_record
from node.ops.state_snapshot import SnapshotWriter, collect, group_record, queue_record


def record(**over) -> dict:
    rec = {
        "schema_version": 1, "node": "rabbit@a", "member_id": "a:25672", "boot_id": "b0", "seq": 0,
        "wall_ms": 1_700_000_000_123, "mono_ms": 5_000, "interval_ms": 5000, "version": "0.1.0",
        "feature_flags": {"supported": ["x"], "enabled": []},
        "groups": [{"name": "metadata", "role": "leader", "term": 2, "leader": "a:25672", "commit_index": 10,
                    "last_applied": 10, "members": ["a:25672", "b:25672"], "reachable": ["b:25672"]}],
        "connections": 1, "sessions": 1, "links": 2,
        "queues": [{"vhost": "/", "name": "q", "type": "classic", "durable": True, "leader": True, "group": None,
                    "depth": 3, "unacked": 1, "consumers": 1, "counters": dict.fromkeys(schema.COUNTERS, 0)}],
        "alarms": [],
    }  # fmt: skip
    rec.update(over)
    return rec


# ------------------------------------------------------------------ schema


def test_a_complete_record_validates():
    validate_record(record())
    assert schema.record_problems(record(extra_field_of_a_newer_writer=1)) == []


@pytest.mark.parametrize("mutate, problem", [
    (lambda r: r.pop("node"), "node: missing"),
    (lambda r: r.update(wall_ms="soon"), "wall_ms: str, want int"),
    (lambda r: r.update(seq=True), "seq: bool, want int"),
    (lambda r: r.update(schema_version=2), "schema_version: 2"),
    (lambda r: r.update(member_id=None), None),  # nullable
    (lambda r: r.update(boot_id=None), "boot_id: null"),
    (lambda r: r["groups"][0].update(reachable="b"), "groups[0].reachable: str, want a list"),
    (lambda r: r["groups"][0].update(term=None), None),
    (lambda r: r["queues"][0].pop("counters"), "queues[0].counters: missing"),
    (lambda r: r["queues"][0]["counters"].update(acknowledged=-1), "queues[0].counters.acknowledged: negative"),
    (lambda r: r["queues"][0].update(unacked=4), "queues[0]: unacked 4 > depth 3"),
    (lambda r: r["queues"][0].pop("durable"), None),  # optional
    (lambda r: r["feature_flags"].update(enabled=[1]), "feature_flags.enabled[0]: int, want str"),
])  # fmt: skip
def test_schema_problems_are_named(mutate, problem):
    rec = record()
    mutate(rec)
    problems = schema.record_problems(rec)
    if problem is None:
        assert problems == []
    else:
        assert any(problem in p for p in problems), problems
        with pytest.raises(SnapshotSchemaError):
            validate_record(rec)


def test_not_an_object():
    assert schema.record_problems([1]) == ["record: list, want an object"]


# ------------------------------------------------------------------ writer


def test_append_stamps_and_writes_one_line_per_record(tmp_path):
    w = SnapshotWriter(str(tmp_path), lambda: {}, interval=2.5)
    w.append({"node": "a"})
    w.append({"node": "a", "seq": 99})
    w._close()
    [path] = snapshot_files(str(tmp_path / "snapshots"))
    assert os.path.basename(path) == "snapshots-1.ndjson"
    lines = open(path, "rb").read().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3
    first, second = (json.loads(x) for x in lines[:2])
    assert first["seq"] == 0 and second["seq"] == 99  # the writer's seq only where the record has none
    assert first["boot_id"] == second["boot_id"] == w.boot_id
    assert first["interval_ms"] == 2500 and first["schema_version"] == schema.SCHEMA_VERSION
    assert isinstance(first["wall_ms"], int) and isinstance(first["mono_ms"], int)


def test_rotation_under_the_size_cap_keeps_the_newest_files(tmp_path):
    w = SnapshotWriter(str(tmp_path), lambda: {}, max_bytes=1000, keep_files=3)
    line = len(json.dumps(record(), separators=(",", ":"))) + 1
    per_file = 1000 // line
    assert per_file >= 1
    n = per_file * 7 + 1
    for i in range(n):
        w.append(record(seq=i))
    w._close()
    files = snapshot_files(str(tmp_path / "snapshots"))
    assert [os.path.basename(f) for f in files] == ["snapshots-6.ndjson", "snapshots-7.ndjson", "snapshots-8.ndjson"]
    for f in files:
        assert os.path.getsize(f) <= 1000
    kept = read_records(str(tmp_path / "snapshots"))
    assert [r["seq"] for r in kept] == list(range(n - len(kept), n))  # the newest, in order, none torn
    for r in kept:
        validate_record(r)


def test_a_record_bigger_than_the_cap_still_goes_in_a_file_of_its_own(tmp_path):
    w = SnapshotWriter(str(tmp_path), lambda: {}, max_bytes=10, keep_files=5)
    w.append({"node": "a"})
    w.append({"node": "b"})
    w._close()
    assert len(snapshot_files(str(tmp_path / "snapshots"))) == 2


def test_every_start_begins_a_new_file_after_the_existing_ones(tmp_path):
    d = tmp_path / "snapshots"
    d.mkdir()
    (d / "snapshots-41.ndjson").write_text('{"node":"a","wall_ms":1,"seq":0}\n{"node":"a","wal')  # torn by a crash
    (d / "notes.txt").write_text("not a snapshot file")
    w = SnapshotWriter(str(tmp_path), lambda: {"node": "a"}, keep_files=10)
    w.tick()
    w._close()
    assert [os.path.basename(f) for f in snapshot_files(str(d))] == ["snapshots-41.ndjson", "snapshots-42.ndjson"]
    assert [r.get("seq") for r in read_records(str(d))] == [0, 0]  # the torn line is skipped


def test_a_failing_source_or_disk_does_not_stop_the_writer(tmp_path, caplog):
    calls = []

    def source():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return {"node": "a"}

    w = SnapshotWriter(str(tmp_path), source)
    assert w.tick() is False
    assert w.tick() is True
    w._close()
    assert "building a snapshot record failed" in caplog.text
    # the directory turns into a file: writing fails, the writer survives and says so
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    w2 = SnapshotWriter(str(blocked), lambda: {"node": "a"})
    assert w2.tick() is False
    assert w2.written == 0


def test_start_writes_at_once_then_every_interval_and_stop_closes(tmp_path):
    n = [0]

    def source():
        n[0] += 1
        return record(seq=n[0])

    async def main():
        w = SnapshotWriter(str(tmp_path), source, interval=0.05)
        await w.start()
        await asyncio.sleep(0.22)
        await w.stop()
        await w.stop()  # twice is fine
        return w

    w = asyncio.run(main())
    got = read_records(str(tmp_path / "snapshots"))
    assert 2 <= len(got) <= 7 and w.written == len(got)  # one at once, then one per period (fewer on a slow machine)
    assert w.current_path is None
    with pytest.raises(ValueError):
        SnapshotWriter(str(tmp_path), source, interval=0)


# ------------------------------------------------------------------ collect


class _Host:
    """A QueueHost for queues made outside a node: a fixed clock, timers never fire."""

    def now_ms(self):
        return 1_700_000_000_000

    def monotonic_ms(self):
        return 1_000

    def call_later(self, delay_s, fn):
        return types.SimpleNamespace(cancel=lambda: None)

    def dead_letter(self, queue, message, reason):
        pass

    def queue_deleted(self, queue):
        pass


def test_queue_record_of_a_classic_queue_reads_its_stats():
    from queues.base import QueueMessage
    from queues.classic import ClassicQueue

    q = ClassicQueue("/", "cq", True, None, False, {"x-max-length": 2, "x-overflow": "reject-publish"}, host=_Host())
    outcomes = []
    for seq in range(3):
        q.publish(QueueMessage(seq, b"m%d" % seq), outcomes.append)
    rec = queue_record(q)
    assert (rec["type"], rec["name"], rec["durable"], rec["leader"], rec["group"]) == ("classic", "cq", True, True,
                                                                                        None)  # fmt: skip
    assert (rec["depth"], rec["unacked"], rec["consumers"]) == (2, 0, 0)
    assert rec["counters"]["published"] == 3 and rec["counters"]["rejected"] == 1
    assert rec["counters"]["recovered"] == 0  # not a classic counter: 0


def test_queue_record_of_a_quorum_queue_gives_published_from_enqueued_and_rejected():
    from queues.quorum import machine
    from queues.quorum.commands import Enqueue, MsgIn
    from queues.quorum.queue import QuorumQueue

    q = QuorumQueue("/", "qq", {"x-queue-type": "quorum", "x-max-length": 2, "x-overflow": "reject-publish"},
                    ("n1",), host=_Host(), quorum_host=types.SimpleNamespace(incarnation="n1#1"), group="qq/%2F/qq")  # fmt: skip
    q.state, _ = machine.apply(Enqueue(tuple(MsgIn(1, None, None) for _ in range(3)), 1000), q.state)
    rec = queue_record(q, leader=False, group=q.group)
    assert (rec["type"], rec["leader"], rec["group"], rec["depth"], rec["unacked"]) == ("quorum", False, "qq/%2F/qq",
                                                                                        2, 0)  # fmt: skip
    assert rec["counters"]["published"] == 3 and rec["counters"]["rejected"] == 1


def test_group_record_lists_the_members_and_those_reached():
    status = {"node": "a:25672", "group": "metadata", "role": "follower", "term": 3, "leader": "b:25672",
              "commit_index": 7, "last_applied": 6,
              "members": [{"node": "a:25672", "reachable": True}, {"node": "b:25672", "reachable": True},
                          {"node": "c:25672", "reachable": False}]}  # fmt: skip
    assert group_record(status) == {
        "name": "metadata", "role": "follower", "term": 3, "leader": "b:25672", "commit_index": 7, "last_applied": 6,
        "members": ["a:25672", "b:25672", "c:25672"], "reachable": ["b:25672"]}  # fmt: skip
    assert group_record({**status, "leader": None}, "qq/%2F/qq")["name"] == "qq/%2F/qq"


def test_a_running_node_writes_valid_snapshots(tmp_path):
    """A real single-node broker (metadata group, a classic and a quorum queue)
    through SnapshotWriter + collect, as the lead wires them."""
    import threading
    import uuid

    import uvloop

    from metadata.commands import EnableFeatureFlag
    from node import __version__
    from node.broker import Broker
    from node.config import Config

    cfg = Config(data_dir=str(tmp_path / "data"), listen_host="127.0.0.1", amqp_port=0, http_port=-1,
                 metrics_port=-1, grpc_port=0, node_name="warren@snap", snapshot_interval=0)  # fmt: skip
    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    broker = Broker(cfg)

    def call(coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def setup():
        await broker.start()
        vhost = broker.vhosts["/"]
        await vhost.declare_queue("cq", True, None, False, {})
        try:
            await broker.cluster.propose(EnableFeatureFlag(f"enable-flag/quorum_queue_v1/{uuid.uuid4()}",
                                                           "quorum_queue_v1"), 10)  # fmt: skip
            qq, _ = await vhost.declare_queue("qq", True, None, False, {"x-queue-type": "quorum"})
            for _ in range(200):  # its group elects itself
                if broker.quorum.is_leader(qq.group):
                    break
                await asyncio.sleep(0.05)
        except Exception:  # quorum queues not there (yet) in this build: the classic one suffices
            pass
        writer = SnapshotWriter(cfg.data_dir, lambda: collect(broker), interval=0.05)
        await writer.start()
        await asyncio.sleep(0.4)
        await writer.stop()

    try:
        call(setup())
    finally:
        call(broker.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
    got = read_records(os.path.join(cfg.data_dir, "snapshots"))
    assert len(got) >= 3
    for r in got:
        validate_record(r)
    last = got[-1]
    assert last["node"] == "warren@snap" and last["member_id"] == broker.cluster.node_id
    assert last["version"] == __version__
    meta = next(g for g in last["groups"] if g["name"] == "metadata")
    assert meta["role"] == "leader" and meta["leader"] == last["member_id"] and meta["reachable"] == []
    queues = {q["name"]: q for q in last["queues"]}
    assert queues["cq"]["type"] == "classic" and queues["cq"]["leader"] is True and queues["cq"]["group"] is None
    if "qq" in queues:
        qq = queues["qq"]
        assert qq["type"] == "quorum" and qq["group"] and qq["leader"] is True, (last["groups"], qq)
        assert any(g["name"] == qq["group"] and g["role"] == "leader" for g in last["groups"])
    assert [r["seq"] for r in got] == list(range(len(got)))
    assert last["connections"] == 0 and last["alarms"] == [] and "quorum_queue_v1" in last["feature_flags"]["supported"]


def test_the_schema_page_describes_every_field():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "snapshot-schema.md").read_text()
    assert f"(version {schema.SCHEMA_VERSION})" in page
    names = list(schema.SCHEMA) + list(schema.GROUP_FIELDS) + list(schema.QUEUE_FIELDS) + list(schema.COUNTERS)
    missing = [n for n in names if f"`{n}`" not in page]
    assert missing == []


def test_the_spark_schema_follows_the_record_schema():
    pytest.importorskip("pyspark")
    from audit.spark_schema import CORRUPT, record_schema

    st = record_schema()
    assert st.fieldNames() == [*schema.SCHEMA, CORRUPT]
    queue = st["queues"].dataType.elementType
    assert queue["counters"].dataType.fieldNames() == list(schema.COUNTERS)
    assert st["groups"].dataType.elementType["reachable"].dataType.simpleString() == "array<string>"
