"""`warren server --workers 2` end to end, with Qpid Proton clients and the HTTP API:
connections land on both workers (SO_REUSEPORT), classic queues are spread over both,
quorum queues run on worker 0, any connection uses any queue, metadata changed through
worker 0 holds on worker 1, and a worker killed with -9 is restarted with every confirmed
message of its queues while the other worker keeps serving."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import psutil
import pytest
import worker_procs
from http_json import HttpError, request_json
from proton import ConnectionException, Message, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection
from volatile_clients import round_trip
from worker_procs import consume, peers_of, placement, publish, scrape

from audit.schema import record_problems

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def api(node, method: str, path: str, body=None, user: str = "guest", password: str = "guest"):
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return request_json(f"http://127.0.0.1:{node.http_port}{path}", method, auth, body)


def workers(node) -> dict[int, psutil.Process]:
    return worker_procs.workers(node.proc.pid, node.port)


def connect_on(node, worker: int, user: str = "guest", password: str = "guest", pinned: bool = True) -> BlockingConnection:
    """A connection on worker `worker`; `pinned` (the default here): its first link names no queue, so it stays
    there and reaches the other worker's queues through the worker link."""
    return worker_procs.connect_on(node.proc.pid, node.port, worker, user, password, pinned)


@pytest.fixture
def two_workers(broker_process_factory, tmp_path):
    data_dir = tmp_path / "data"
    node = broker_process_factory(data_dir, extra_args=["--workers", "2"])
    node.data_dir = str(data_dir)
    return node


def test_connections_on_either_worker_use_every_queue_of_the_node(two_workers):
    node = two_workers
    for i in range(4):
        api(node, "PUT", f"/api/queues/%2F/cq{i}", {"durable": True})
    api(node, "PUT", "/api/queues/%2F/qq", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    assert sorted(placement(node.data_dir).values()) == [0, 0, 1, 1]  # quorum queues run on worker 0
    shown = {q["name"]: q["worker"] for q in api(node, "GET", "/api/queues")}
    assert shown == {**placement(node.data_dir), "qq": 0}  # per-worker detail, as the API shows it
    assert api(node, "GET", "/api/queues/%2F/cq1")["worker"] == placement(node.data_dir)["cq1"]
    api(node, "PUT", "/api/users/worker-user", {"password": "s3cret", "tags": ""})
    api(node, "PUT", "/api/permissions/%2F/worker-user", {"configure": ".*", "write": ".*", "read": ".*"})
    queues = [f"cq{i}" for i in range(4)] + ["qq"]

    # a user made through worker 0 logs in on worker 1, whose publishes reach every queue
    on_1 = connect_on(node, 1, "worker-user", "s3cret")
    for q in queues:
        publish(on_1, q, [f"{q}-from-1-{j}" for j in range(5)])
    on_0 = connect_on(node, 0)
    for q in queues:
        publish(on_0, q, [f"{q}-from-0-{j}" for j in range(5)])
    counts = {q["name"]: q["messages"] for q in api(node, "GET", "/api/queues")}
    assert counts == {q: 10 for q in queues}

    # consumers on each worker get every message of queues on either worker, in order
    for q, conn in zip(queues, [on_0, on_1, on_0, on_1, on_1], strict=True):
        assert consume(conn, q, 10) == [f"{q}-from-1-{j}" for j in range(5)] + [f"{q}-from-0-{j}" for j in range(5)]
    on_1.close()
    on_0.close()


@pytest.mark.parametrize("requester_on, responder_on", [(1, 0), (0, 1)])
def test_a_reply_crosses_to_the_requesters_worker(two_workers, requester_on, responder_on):
    node = two_workers
    api(node, "PUT", "/api/queues/%2F/requests", {"durable": True})
    asking, answering = connect_on(node, requester_on), connect_on(node, responder_on)
    round_trip(asking, answering, "requests")
    asking.close()
    answering.close()


def test_a_worker_killed_with_minus_9_comes_back_with_every_confirmed_message_and_the_other_serves_meanwhile(
    two_workers,
):
    node = two_workers
    for name in ("first", "second"):
        api(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    places = placement(node.data_dir)
    on_worker = {places[name]: name for name in places}
    assert set(on_worker) == {0, 1}
    conn = connect_on(node, 0)
    for name in places:
        publish(conn, name, [f"{name}-{j}" for j in range(200)])
    conn.close()

    victim = workers(node)[1]
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # meanwhile: worker 0 takes every new connection and serves its own queue
    meanwhile = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.port}", allowed_mechs="PLAIN")
    publish(meanwhile, on_worker[0], ["while-1-was-down"])
    meanwhile.close()

    back = workers(node)[1]
    assert back.pid != victim.pid
    deadline = time.monotonic() + 20
    while True:  # worker 0 reaches the restarted worker once its link is up again
        try:
            conn = connect_on(node, 0)
            got = consume(conn, on_worker[1], 200)
            break
        except Exception:
            assert time.monotonic() < deadline, "the restarted worker's queue never came back"
            time.sleep(0.2)
    assert got == [f"{on_worker[1]}-{j}" for j in range(200)]
    assert consume(conn, on_worker[0], 201)[-1] == "while-1-was-down"
    conn.close()
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(30) == 0


@pytest.mark.parametrize("args, says", [
    (["--workers", "-1"], "workers must be a number of processes from 1 to 64"),
    (["--workers", "65"], "workers must be a number of processes from 1 to 64"),
])  # fmt: skip
def test_settings_a_node_of_several_workers_cannot_run_are_refused_by_name(tmp_path, args, says):
    done = subprocess.run([sys.executable, "-m", "node.cli", "server", "--data-dir", str(tmp_path), "--amqp-port", "0",
                           "--http-port", "0", "--metrics-port", "0", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0
    assert says in done.stderr


def test_worker_1_keeps_serving_its_own_queues_while_worker_0_restarts(two_workers):
    node = two_workers
    for name in ("first", "second"):
        api(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    places = placement(node.data_dir)
    mine = next(name for name, worker in places.items() if worker == 1)
    on_1 = connect_on(node, 1)
    publish(on_1, mine, ["before"])

    node_worker = workers(node)[0]
    node_worker.send_signal(signal.SIGKILL)
    node_worker.wait(10)
    publish(on_1, mine, ["while-0-was-down"])  # worker 1's own queue, on its open connection
    assert consume(on_1, mine, 2) == ["before", "while-0-was-down"]

    back = workers(node)[0]
    assert back.pid != node_worker.pid
    other = next(name for name in places if name != mine)
    deadline = time.monotonic() + 20
    while True:  # worker 1 reaches worker 0's queue again once its links are back
        try:
            publish(on_1, other, ["after"])
            break
        except Exception:
            assert time.monotonic() < deadline, "worker 0's queue never came back for worker 1"
            on_1.close()
            time.sleep(0.2)
            on_1 = connect_on(node, 1)
    assert consume(on_1, other, 1) == ["after"]
    on_1.close()


def test_the_http_api_shows_and_closes_the_connections_of_every_worker(two_workers):
    node = two_workers
    on_0, on_1 = connect_on(node, 0), connect_on(node, 1)
    listed = {c["worker"]: c for c in api(node, "GET", "/api/connections")}
    assert sorted(listed) == [0, 1]
    assert all(c["user"] == "guest" and c["vhost"] == "/" for c in listed.values())
    name = listed[1]["name"]
    assert api(node, "GET", f"/api/connections/{urllib.parse.quote(name, safe='')}")["worker"] == 1
    assert [c["name"] for c in api(node, "GET", "/api/vhosts/%2F/connections")] == sorted(c["name"] for c in listed.values())

    api(node, "DELETE", f"/api/connections/{urllib.parse.quote(name, safe='')}")
    deadline = time.monotonic() + 10
    while name in {c["name"] for c in api(node, "GET", "/api/connections")}:
        assert time.monotonic() < deadline, "the connection on worker 1 was not closed"
        time.sleep(0.05)
    with pytest.raises(ConnectionException):  # the client was told: its connection is gone
        on_1.create_sender("/queues/anything").send(Message(body="x"))
    on_0.close()


def test_the_http_api_shows_every_workers_consumers_and_sessions_and_closes_a_users_connections(two_workers):
    node = two_workers
    api(node, "PUT", "/api/users/other", {"password": "pw", "tags": ""})
    api(node, "PUT", "/api/permissions/%2F/other", {"configure": ".*", "write": ".*", "read": ".*"})
    for name in ("on-0", "on-1"):
        api(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    conns = {w: connect_on(node, w) for w in (0, 1)}
    readers = {w: conns[w].create_receiver(f"/queues/on-{w}", credit=7, name=f"reader-{w}") for w in (0, 1)}
    others = connect_on(node, 1, "other", "pw")
    names = {c["worker"]: c["name"] for c in api(node, "GET", "/api/connections") if c["user"] == "guest"}

    consumers = {c["consumer_tag"]: c for c in api(node, "GET", "/api/consumers")}
    assert sorted(consumers) == ["reader-0", "reader-1"]
    assert consumers["reader-1"]["channel_details"]["connection_name"] == names[1]
    assert consumers["reader-1"]["queue"] == {"name": "on-1", "vhost": "/"}
    assert consumers["reader-1"]["prefetch_count"] == 7
    assert sorted(c["consumer_tag"] for c in api(node, "GET", "/api/consumers/%2F")) == ["reader-0", "reader-1"]

    path = f"/api/connections/{urllib.parse.quote(names[1], safe='')}"
    (session,) = api(node, "GET", path + "/sessions")
    assert [link["link_name"] for link in session["outgoing_links"]] == ["reader-1"]
    assert api(node, "GET", path + "/channels") == []
    with pytest.raises(HttpError) as refused:  # another user's connection, on worker 1 too
        api(node, "GET", path + "/sessions", user="other", password="pw")
    assert refused.value.status == 401
    with pytest.raises(HttpError) as missing:
        api(node, "GET", "/api/connections/nothing-of-the-kind/sessions")
    assert missing.value.status == 404

    assert sorted(c["name"] for c in api(node, "GET", "/api/connections/username/guest")) == sorted(names.values())
    api(node, "DELETE", "/api/connections/username/guest")
    deadline = time.monotonic() + 10
    while {c["user"] for c in api(node, "GET", "/api/connections")} != {"other"}:
        assert time.monotonic() < deadline, "guest's connections were not closed on both workers"
        time.sleep(0.05)
    for conn in conns.values():
        with pytest.raises(ConnectionException):
            conn.create_sender("/queues/on-0").send(Message(body="x"))
    del readers
    others.close()


def test_the_nodes_snapshot_records_hold_every_workers_queues_and_connections(broker_process_factory, tmp_path):
    """The audit reads one node: worker 0's records count the other workers' queues (each naming
    its `worker`) and clients as the node's."""
    data_dir = tmp_path / "data"
    node = broker_process_factory(data_dir, extra_args=["--workers", "2", "--snapshot-interval", "0.2"])
    for name in ("s-a", "s-b"):
        api(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    assert sorted(placement(str(data_dir)).values()) == [0, 1]
    on_0, on_1 = connect_on(node, 0), connect_on(node, 1)
    for name in ("s-a", "s-b"):
        publish(on_1, name, [f"{name}-{i}" for i in range(3)])

    def latest() -> dict | None:
        files = sorted((data_dir / "snapshots").glob("snapshots-*.ndjson"), key=lambda p: int(p.stem.split("-")[1]))
        lines = files[-1].read_text().splitlines() if files else []
        return json.loads(lines[-1]) if lines else None

    deadline = time.monotonic() + 15
    while True:  # records are written every 0.2 s: no event to await from outside the node
        record = latest()
        queues = {q["name"]: q for q in (record or {}).get("queues", [])}
        if set(queues) == {"s-a", "s-b"} and all(q["counters"]["published"] == 3 for q in queues.values()):
            break
        assert time.monotonic() < deadline, f"no record with both workers' queues: {record}"
        time.sleep(0.1)
    assert record_problems(record) == []
    places = placement(str(data_dir))
    assert {name: q["worker"] for name, q in queues.items()} == places
    assert all(q["depth"] == 3 and q["leader"] for q in queues.values())
    assert record["connections"] == 2 and record["links"] == 2  # a pinning sender on each worker's connection
    on_0.close()
    on_1.close()


def test_a_stream_read_from_another_worker_starts_at_the_offset_its_reader_asks(two_workers):
    node = two_workers
    api(node, "PUT", "/api/queues/%2F/events", {"durable": True, "arguments": {"x-queue-type": "stream"}})
    on_1 = connect_on(node, 1)
    publish(on_1, "events", [f"e{i}" for i in range(10)])  # streams run on worker 0
    spec = Filter({symbol("rabbitmq:stream-offset-spec"): "first"})
    reader = on_1.create_receiver("/queues/events", credit=20, options=spec)
    assert [reader.receive(timeout=10).body for _ in range(10)] == [f"e{i}" for i in range(10)]
    reader.accept()
    on_1.close()


def test_a_node_of_one_process_started_with_two_workers_spreads_its_queues_with_their_messages(
    broker_process_factory, tmp_path
):
    data_dir = tmp_path / "data"
    one = broker_process_factory(data_dir, extra_args=["--workers", "1"])
    for name in ("old-a", "old-b", "old-c", "old-d"):
        api(one, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    conn = BlockingConnection(one.url, allowed_mechs="PLAIN")
    for name in ("old-a", "old-b"):  # old-c and old-d stay empty
        publish(conn, name, [f"{name}-{j}" for j in range(50)])
    conn.close()
    assert one.terminate() == 0

    two = broker_process_factory(data_dir, extra_args=["--workers", "2"])
    two.data_dir = str(data_dir)
    api(two, "PUT", "/api/queues/%2F/new", {"durable": True})
    places = placement(two.data_dir)
    assert places["old-a"] == 0 and places["old-b"] == 1  # copied into worker 1's store before it started
    assert sorted(places[name] for name in ("old-c", "old-d")) == [0, 1]  # nothing stored: placed as new ones
    assert sorted(places.values()) == [0, 0, 0, 1, 1]
    on_1 = connect_on(two, 1)
    for name in ("old-a", "old-b"):
        assert consume(on_1, name, 50) == [f"{name}-{j}" for j in range(50)]
    publish(on_1, "new", ["kept"])
    on_1.close()
    assert two.terminate() == 0

    again = broker_process_factory(data_dir, extra_args=["--workers", "2"])  # the places hold across restarts
    again.data_dir = str(data_dir)
    assert placement(again.data_dir) == places
    on_0 = connect_on(again, 0)
    assert consume(on_0, "new", 1) == ["kept"]
    for name in ("old-a", "old-b"):  # taken once: neither store brought them back
        publish(on_0, name, [f"{name}-again"])
        assert consume(on_0, name, 1) == [f"{name}-again"]
    publish(on_0, "old-b", ["kept-again"])  # into worker 1's store
    on_0.close()
    assert again.terminate() == 0

    # one worker again: worker 1's queues move to worker 0's store, messages and all
    assert os.path.isdir(data_dir / "workers" / "1" / "messages")
    fewer = broker_process_factory(data_dir, extra_args=["--workers", "1"])
    assert set(placement(str(data_dir)).values()) == {0}
    assert not os.path.exists(data_dir / "workers" / "1")
    conn = BlockingConnection(fewer.url, allowed_mechs="PLAIN")
    assert consume(conn, "old-b", 1) == ["kept-again"]
    conn.close()
    assert fewer.terminate() == 0


def test_a_node_started_with_fewer_workers_moves_the_queues_of_those_gone_onto_the_others(
    broker_process_factory, tmp_path
):
    data_dir = tmp_path / "data"
    three, before = worker_procs.six_queues_on_three_workers(broker_process_factory, data_dir, 30)
    names = sorted(before)
    assert three.terminate() == 0

    two = broker_process_factory(data_dir, extra_args=["--workers", "2"])
    after = placement(str(data_dir))
    assert {n: w for n, w in after.items() if before[n] < 2} == {n: w for n, w in before.items() if w < 2}
    assert sorted(after.values()) == [0, 0, 0, 1, 1, 1]  # worker 2's two queues went one to each
    assert not os.path.exists(data_dir / "workers" / "2")
    conn = worker_procs.connect_on(two.proc.pid, two.port, 1, pinned=True)
    for name in names:
        assert consume(conn, name, 30) == [f"{name}-{j}" for j in range(30)]
    conn.close()
    assert two.terminate() == 0


def test_a_node_runs_one_worker_per_usable_core_by_default(broker_process_factory, tmp_path, monkeypatch):
    cores = len(os.sched_getaffinity(0))  # no CPU quota here (tests/node/workers/test_cores.py reads those)
    monkeypatch.delenv("WARREN_WORKERS")  # tests/conftest.py's one worker for the suite's nodes
    node = broker_process_factory(tmp_path / "data")
    if cores == 1:
        assert psutil.Process(node.proc.pid).children() == []
    else:
        assert sorted(worker_procs.workers(node.proc.pid, node.port, count=cores)) == list(range(cores))
    assert node.terminate() == 0


def landed_port(node, worker: int, conn_before: dict[int, set[int]]) -> int:
    """The client port of the one connection that appeared on `worker` since `conn_before`."""
    (port,) = peers_of(workers(node)[worker], node.port) - conn_before[worker]
    return port


def test_a_connection_whose_first_link_names_a_queue_of_another_worker_moves_to_that_worker(two_workers):
    node = two_workers
    for name in ("cq-a", "cq-b"):
        api(node, "PUT", f"/api/queues/%2F/{name}", {"durable": True})
    on_worker = {worker: name for name, worker in placement(node.data_dir).items()}
    assert sorted(on_worker) == [0, 1]
    waiting: dict[str, list[str]] = {name: [] for name in on_worker.values()}  # each queue's bodies, in order
    for queue_worker, queue in on_worker.items():
        other = 1 - queue_worker
        procs = workers(node)
        before = {k: peers_of(p, node.port) for k, p in procs.items()}
        publisher = connect_on(node, other, pinned=False)
        port = landed_port(node, other, before)
        waiting[queue] += [f"{queue}-{i}" for i in range(20)]
        publish(publisher, queue, waiting[queue][-20:])  # each one accepted
        # the socket itself moved: the queue's worker holds it, the accepting worker no longer does
        assert port in peers_of(procs[queue_worker], node.port)
        assert port not in peers_of(procs[other], node.port)
        shown = [c for c in api(node, "GET", "/api/connections") if c["peer_port"] == port]
        assert [c["worker"] for c in shown] == [queue_worker]
        # the moved connection goes on: a second link, to the other worker's queue, crosses as before
        waiting[on_worker[other]].append(f"{queue}-then-{on_worker[other]}")
        publish(publisher, on_worker[other], waiting[on_worker[other]][-1:])
        publisher.close()

        consumer = connect_on(node, other, pinned=False)  # its ATTACH and FLOW come in one write: both replayed
        assert consume(consumer, queue, len(waiting[queue])) == waiting[queue]
        waiting[queue] = []
        consumer.close()
    conn = connect_on(node, 0)
    for queue, bodies in waiting.items():
        assert consume(conn, queue, len(bodies)) == bodies
    conn.close()


def test_a_connection_whose_first_link_is_no_queue_stays_on_its_worker(two_workers):
    node = two_workers
    api(node, "PUT", "/api/queues/%2F/cq-a", {"durable": True})
    api(node, "PUT", "/api/queues/%2F/cq-b", {"durable": True})
    api(node, "POST", "/api/bindings/%2F/e/amq.direct/q/cq-b", {"routing_key": "k"})
    queue_worker = placement(node.data_dir)["cq-b"]
    other = 1 - queue_worker
    procs = workers(node)
    before = {k: peers_of(p, node.port) for k, p in procs.items()}
    conn = connect_on(node, other, pinned=False)
    port = landed_port(node, other, before)
    sender = conn.create_sender("/exchanges/amq.direct/k")
    sender.send(Message(body="through the exchange", durable=True))
    publish(conn, "cq-b", ["then the queue"])  # not its first link: the connection stays
    assert port in peers_of(procs[other], node.port)
    assert consume(conn, "cq-b", 2) == ["through the exchange", "then the queue"]
    conn.close()


def test_prometheus_and_the_overview_count_every_workers_connections_and_messages_as_one_node(two_workers):
    node = two_workers
    api(node, "PUT", "/api/queues/%2F/counted", {"durable": True})
    before = scrape(node)
    received = 'rabbitmq_global_messages_received_total{protocol="amqp10"}'
    # (pinned: each stays on its worker, whichever runs the queue)
    on_0, on_1 = connect_on(node, 0), connect_on(node, 1)
    publish(on_0, "counted", ["a"] * 3)
    publish(on_1, "counted", ["b"] * 5)
    receiver = on_1.create_receiver("/queues/counted", credit=0)
    after = scrape(node)
    assert after[received] - before[received] == 8  # 3 on worker 0, 5 on worker 1
    assert after["rabbitmq_connections"] == 2 and after["rabbitmq_channels"] == 2
    assert after['warren_worker_connections{worker="0"}'] == after['warren_worker_connections{worker="1"}'] == 1
    assert after['rabbitmq_global_publishers{protocol="amqp10"}'] == 2  # the two pins
    assert after['rabbitmq_global_consumers{protocol="amqp10"}'] == 1
    overview = api(node, "GET", "/api/overview")  # the HTTP API's counts are the node's too
    assert overview["object_totals"]["connections"] == 2 and overview["object_totals"]["channels"] == 2
    assert overview["message_stats"]["publish"] == after[received]
    # what each worker uses, and the node's memory, descriptors and sockets as every worker's sum
    rss = {w: workers(node)[w].memory_info().rss for w in (0, 1)}
    for w in (0, 1):
        assert 0.5 < after[f'warren_worker_resident_memory_bytes{{worker="{w}"}}'] / rss[w] < 2
        assert after[f'warren_worker_cpu_seconds_total{{worker="{w}"}}'] > 0
    assert after["rabbitmq_process_resident_memory_bytes"] > max(rss.values()) * 1.5
    shown = api(node, "GET", "/api/nodes")[0]
    assert [{k: w[k] for k in ("worker", "state", "pid", "connections", "classic_queues")} for w in shown["workers"]] == [
        {"worker": k, "state": "running", "pid": workers(node)[k].pid, "connections": 1,
         "classic_queues": list(placement(node.data_dir).values()).count(k)} for k in (0, 1)]  # fmt: skip
    assert all(w["memory"] > 0 and w["cpu_seconds"] > 0 for w in shown["workers"])
    assert shown["sockets_used"] == 2
    assert shown["mem_limit"] == after["rabbitmq_resident_memory_limit_bytes"]
    assert shown["mem_used"] > max(rss.values()) * 1.5  # both workers' memory, as their alarms count it
    receiver.close()
    on_0.close()
    on_1.close()


def test_a_drain_stops_and_closes_every_workers_amqp_and_a_revive_opens_them_again(two_workers):
    node = two_workers
    on_0 = connect_on(node, 0)
    on_1 = connect_on(node, 1)
    report = api(node, "POST", "/api/maintenance/drain", {"timeout": 10})
    assert report["state"] == "drained"
    for conn in (on_0, on_1):  # each worker closed its client's connection
        with pytest.raises(ConnectionException):
            conn.create_sender("/queues/anything").send(Message(body="x"))
    with pytest.raises(ConnectionRefusedError):  # no worker listens
        socket.create_connection(("127.0.0.1", node.port), timeout=5).close()
    api(node, "POST", "/api/maintenance/revive", {})
    workers(node)  # waits until both listen again
    connect_on(node, 1).close()
    connect_on(node, 0).close()
