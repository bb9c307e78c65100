"""Shovels between two queues of one Warren node: over the `local` protocol
and over amqp10 URIs to the same node, in each ack-mode, with
src-delete-after; status at /api/shovels."""

from __future__ import annotations

import pytest
from mgmt_client import sample, scrape
from shovel_helpers import nothing_left, publish, receive, wait_until

from node.shovel.manager import owner_of

LOCAL = {"src-protocol": "local", "src-uri": "amqp://", "src-queue": "from",
         "dest-protocol": "local", "dest-uri": "amqp://", "dest-queue": "to"}  # fmt: skip


def amqp10(port: int) -> dict:
    uri = f"amqp://guest:guest@127.0.0.1:{port}"
    return {"src-protocol": "amqp10", "src-uri": uri, "src-address": "/amq/queue/from",
            "dest-protocol": "amqp10", "dest-uri": uri, "dest-address": "/queues/to"}  # fmt: skip


@pytest.fixture
def queues(api):
    for q in ("from", "to"):
        assert api.put(f"/api/queues/%2F/{q}", {"durable": True}).status == 201
    return api


@pytest.mark.parametrize("ack_mode", ["on-confirm", "on-publish", "no-ack"])
@pytest.mark.parametrize("protocol", ["local", "amqp10"])
def test_messages_move_in_order(node, queues, ack_mode, protocol):
    api = queues
    bodies = [f"m{i}" for i in range(300)]
    publish(node.url, "/queues/from", bodies)
    value = LOCAL if protocol == "local" else amqp10(node.port)
    assert api.put("/api/parameters/shovel/%2F/mover", {"value": {**value, "ack-mode": ack_mode,
                                                                   "src-prefetch-count": 25}}).status == 201  # fmt: skip
    got = receive(node.url, "/queues/to", len(bodies))
    assert [m.body for m in got] == bodies
    assert nothing_left(node.url, "/queues/from")
    wait_until(lambda: [s.get("forwarded") for s in api.get("/api/shovels").body] == [300], what="the count")
    [status] = api.get("/api/shovels/%2F").body
    assert status["state"] == "running" and status["type"] == "dynamic" and status["vhost"] == "/"
    assert status["node"] == "warren@test" and status["name"] == "mover"
    if protocol == "amqp10":
        assert "guest:guest" not in status["src_uri"] and status["src_address"] == "/amq/queue/from"
    else:
        assert status["src_queue"] == "from" and status["dest_queue"] == "to"
    # messages published later follow
    publish(node.url, "/queues/from", ["late"])
    assert [m.body for m in receive(node.url, "/queues/to", 1)] == ["late"]
    assert api.delete("/api/shovels/vhost/%2F/mover").status == 204
    wait_until(lambda: api.get("/api/shovels").body == [], what="the shovel to stop")
    publish(node.url, "/queues/from", ["stays"])
    assert nothing_left(node.url, "/queues/to")


def test_src_delete_after_a_count_stops_and_deletes_the_shovel(node, queues):
    api = queues
    publish(node.url, "/queues/from", [f"m{i}" for i in range(20)])
    value = {**LOCAL, "src-delete-after": 7, "src-prefetch-count": 3}
    assert api.put("/api/parameters/shovel/%2F/seven", {"value": value}).status == 201
    wait_until(lambda: api.get("/api/parameters/shovel/%2F/seven").status == 404, what="the shovel to finish")
    assert [m.body for m in receive(node.url, "/queues/to", 7)] == [f"m{i}" for i in range(7)]
    assert nothing_left(node.url, "/queues/to")
    assert [m.body for m in receive(node.url, "/queues/from", 13)] == [f"m{i}" for i in range(7, 20)]


def test_src_delete_after_queue_length_moves_what_was_there(node, queues):
    api = queues
    publish(node.url, "/queues/from", [f"m{i}" for i in range(12)])
    value = {**LOCAL, "src-delete-after": "queue-length"}
    assert api.put("/api/parameters/shovel/%2F/drain", {"value": value}).status == 201
    wait_until(lambda: api.get("/api/parameters/shovel/%2F/drain").status == 404, what="the shovel to finish")
    assert [m.body for m in receive(node.url, "/queues/to", 12)] == [f"m{i}" for i in range(12)]


def test_forward_headers_name_the_shovel(node, queues):
    api = queues
    publish(node.url, "/queues/from", ["x"])
    assert (
        api.put("/api/parameters/shovel/%2F/fw", {"value": {**LOCAL, "dest-add-forward-headers": True}}).status == 201
    )
    [m] = receive(node.url, "/queues/to", 1)
    assert m.body == "x"
    assert m.annotations["x-opt-shovel-name"] == "fw" and m.annotations["x-opt-shovel-type"] == "dynamic"
    assert m.annotations["x-opt-shovelled-by"]


def test_a_missing_destination_is_reported_and_retried(node, queues):
    api = queues
    value = {**LOCAL, "dest-queue": "absent", "reconnect-delay": 0.2}
    assert api.put("/api/parameters/shovel/%2F/broken", {"value": value}).status == 201
    wait_until(lambda: "no queue 'absent'" in (api.get("/api/shovels").body or [{}])[0].get("reason", ""),
               what="the error")  # fmt: skip
    [status] = api.get("/api/shovels").body
    assert status["state"] in ("terminated", "starting")
    assert api.put("/api/queues/%2F/absent", {"durable": True}).status == 201
    publish(node.url, "/queues/from", ["arrives"])
    assert [m.body for m in receive(node.url, "/queues/absent", 1)] == ["arrives"]
    assert api.delete("/api/shovels/vhost/%2F/broken/restart").status == 204
    assert api.delete("/api/shovels/vhost/%2F/nope/restart").status == 404


def test_prometheus_counts_the_shovels_by_state(node, queues):
    api = queues
    assert sample(scrape(node), "rabbitmq_shovel_dynamic", status="running") == 0
    assert api.put("/api/parameters/shovel/%2F/ok", {"value": LOCAL}).status == 201
    broken = {**LOCAL, "dest-queue": "absent", "reconnect-delay": 30}
    assert api.put("/api/parameters/shovel/%2F/broken", {"value": broken}).status == 201
    wait_until(lambda: sorted(s["state"] for s in api.get("/api/shovels").body) == ["running", "terminated"],
               what="one running, one failed")  # fmt: skip
    text = scrape(node)
    assert sample(text, "rabbitmq_shovel_dynamic", status="running") == 1
    assert sample(text, "rabbitmq_shovel_dynamic", status="terminated") == 1


def test_a_list_of_uris_is_tried_in_turn(node, queues):
    api = queues
    good = f"amqp://guest:guest@127.0.0.1:{node.port}"
    value = {**amqp10(node.port), "src-uri": ["amqp://guest:guest@127.0.0.1:1", good], "reconnect-delay": 0.1}
    publish(node.url, "/queues/from", ["via the second uri"])
    assert api.put("/api/parameters/shovel/%2F/two-uris", {"value": value}).status == 201
    assert [m.body for m in receive(node.url, "/queues/to", 1)] == ["via the second uri"]


def test_a_refused_login_is_the_reason(node, queues):
    api = queues
    value = {**amqp10(node.port), "src-uri": f"amqp://guest:wrong@127.0.0.1:{node.port}", "reconnect-delay": 60}
    assert api.put("/api/parameters/shovel/%2F/bad-login", {"value": value}).status == 201
    wait_until(lambda: "login refused" in (api.get("/api/shovels").body or [{}])[0].get("reason", ""),
               what="the login error")  # fmt: skip


def test_a_shovel_moving_to_another_node_finishes_what_it_has_in_flight_and_copies_nothing_twice(node, queues):
    """When its owner changes (a member joined that ranks higher for it), the shovel stops taking
    from the source and settles every copy the destination confirmed before it stops, so the next
    node to run it starts where it left off instead of moving its in-flight window again; what
    the source sent before it saw the credit taken back is given back, not copied (once, on a
    loaded machine, 251 such late deliveries were copied and then given back as the connection
    closed: copied twice)."""
    api, manager = queues, node.broker.shovels
    me, other = manager.node.node_id, "warren@elsewhere"
    name = next(f"mover{i}" for i in range(100) if owner_of("/", f"mover{i}", [me, other]) == other)
    n = 4000
    publish(node.url, "/queues/from", [f"m{i}" for i in range(n)])
    value = {**LOCAL, "ack-mode": "on-confirm", "src-prefetch-count": 500}
    assert api.put(f"/api/parameters/shovel/%2F/{name}", {"value": value}).status == 201
    wait_until(lambda: (api.get("/api/shovels").body or [{}])[0].get("forwarded", 0) >= 300, what="moving")
    members, reachable = manager.node.members, manager.node.is_reachable
    node.call(setattr, manager.node, "members", lambda: [me, other])  # the cluster as it would look
    node.call(setattr, manager.node, "is_reachable", lambda member: True)
    node.call(manager.reconcile)
    wait_until(lambda: api.get("/api/queues/%2F/from").body["consumers"] == 0, what="the shovel to stop here")
    source, moved = api.get("/api/queues/%2F/from").body, api.get("/api/queues/%2F/to").body["messages"]
    # stopped mid-way, or (a fast machine) done before the handover came: nothing left unsettled either way
    assert 0 < moved <= n and source["messages_unacknowledged"] == 0
    assert source["messages"] + moved == n  # what was in flight was finished: moved once or still here
    node.call(setattr, manager.node, "members", members)  # the other node gone: it comes back here
    node.call(setattr, manager.node, "is_reachable", reachable)
    node.call(manager.reconcile)
    got = receive(node.url, "/queues/to", n, timeout=60)
    assert sorted(m.body for m in got) == sorted(f"m{i}" for i in range(n))
    assert nothing_left(node.url, "/queues/to") and nothing_left(node.url, "/queues/from")


def test_a_local_destination_is_checked_as_a_client_link_to_the_queue_would_be(node, queues):
    """A local destination takes the copies in the node's own process, with a client's checks:
    the URI's user logs in with its password, needs access to the vhost and write on the
    default exchange; each refusal is the shovel's reason, naming it."""
    api = queues
    node.add_user("reader", "secret")
    node.set_permissions("reader", "/", write="^$")  # may read, may not publish
    cases = {"amqp://reader:wrong@": "login refused for user 'reader'",
             "amqp://reader:secret@": "write access to exchange 'amq.default' in vhost '/' refused for user 'reader'",
             "amqp://guest:guest@/elsewhere": "virtual host 'elsewhere' does not exist"}  # fmt: skip
    for uri, reason in cases.items():
        value = {**LOCAL, "dest-uri": uri, "reconnect-delay": 30}
        assert api.put("/api/parameters/shovel/%2F/checked", {"value": value}).status in (201, 204)
        wait_until(lambda reason=reason: reason in (api.get("/api/shovels").body or [{}])[0].get("reason", ""), what=reason)
    publish(node.url, "/queues/from", ["stays"])
    assert nothing_left(node.url, "/queues/to")
    node.set_permissions("reader", "/")  # allowed now: the next try moves it
    value = {**LOCAL, "dest-uri": "amqp://reader:secret@", "reconnect-delay": 0.2}
    assert api.put("/api/parameters/shovel/%2F/checked", {"value": value}).status == 204
    assert [m.body for m in receive(node.url, "/queues/to", 1)] == ["stays"]


def test_a_local_destination_holds_the_copies_during_a_resource_alarm_and_refuses_what_its_queue_refuses(node, queues):
    """During a resource alarm the shovel sends no copy (as a client's credit would go to zero)
    and goes on once it clears; a copy the queue refuses (x-overflow reject-publish) is
    rejected at the source, as a client's publish would be."""
    api = queues
    assert api.put("/api/queues/%2F/small", {"durable": True, "arguments": {"x-max-length": 3,
                                                                            "x-overflow": "reject-publish"}}).status == 201  # fmt: skip
    publish(node.url, "/queues/from", [f"m{i}" for i in range(5)])
    node.call(node.broker.alarms.force, "memory", True)
    value = {**LOCAL, "dest-queue": "small", "src-prefetch-count": 10}
    assert api.put("/api/parameters/shovel/%2F/held", {"value": value}).status == 201
    wait_until(lambda: api.get("/api/queues/%2F/from").body["messages_unacknowledged"] == 5, what="the shovel to take them")
    assert api.get("/api/queues/%2F/small").body["messages"] == 0  # held by the alarm
    node.call(node.broker.alarms.force, "memory", False)
    wait_until(lambda: api.get("/api/queues/%2F/from").body["messages"] == 0, what="the source to empty")
    assert [m.body for m in receive(node.url, "/queues/small", 3)] == ["m0", "m1", "m2"]
    assert nothing_left(node.url, "/queues/small")  # m3 and m4 were refused, and rejected at the source


def test_a_local_destination_deleted_under_the_shovel_leaves_the_messages_at_the_source(node, queues):
    api = queues
    value = {**LOCAL, "reconnect-delay": 0.2}
    assert api.put("/api/parameters/shovel/%2F/mover", {"value": value}).status == 201
    publish(node.url, "/queues/from", ["first"])
    assert [m.body for m in receive(node.url, "/queues/to", 1)] == ["first"]
    assert api.delete("/api/queues/%2F/to").status == 204
    publish(node.url, "/queues/from", [f"m{i}" for i in range(5)])  # none refused: they wait at the source
    wait_until(lambda: "no queue 'to'" in (api.get("/api/shovels").body or [{}])[0].get("reason", ""),
               what="the shovel to name the missing queue")  # fmt: skip
    assert api.get("/api/queues/%2F/from").body["messages"] == 5
    assert api.put("/api/queues/%2F/to", {"durable": True}).status == 201
    assert [m.body for m in receive(node.url, "/queues/to", 5)] == [f"m{i}" for i in range(5)]
