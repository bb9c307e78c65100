"""node/client/management/request.py and the pure parts of node_link.py without a
node or sockets: a VHost on a stub node, requests in, (status, body) out."""

from __future__ import annotations

import asyncio

import pytest

from amqp.definitions import AmqpValue, Properties
from amqp.message import Message
from metadata import commands as mc
from metadata.machine import MetadataMachine
from metadata.projections import Projections
from node.client.management import request as mreq
from node.client.management.node_link import reply, request_message
from node.ops.metrics import NodeMetrics
from node.vhosts.local_queues import LocalQueues, Owners
from node.vhosts.metadata_store import MetadataStore
from node.vhosts.vhost import QueueTypeNotSupported, ResourceLocked
from queues.classic import ClassicQueue, MemoryPersistence
from routing import errors
from routing.permissions import AccessRefused, Permission


class LocalNode:
    """A node without sockets or Raft: the real metadata machine, projections
    and queue placement, each command applied at once (MetadataStore.local)."""

    connections = ()
    node_id = "warren@unit"

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.vhosts: dict = {}
        self.metrics = NodeMetrics()
        self.owners = Owners(self.node_id)
        self.metrics = NodeMetrics()
        self.projections = Projections()
        self.local_queues = LocalQueues(self)
        machine = MetadataMachine()
        machine.subscribe(self.projections.on_applied, self.projections.on_restored)
        machine.subscribe(self.local_queues.on_applied, self.local_queues.on_restored)
        self.metadata = MetadataStore.local(machine)
        loop.run_until_complete(self.metadata.run(mc.Bootstrap("", "/", "", "guest", "")))
        loop.run_until_complete(self.metadata.run(mc.AddMember("", self.node_id, "0.1.0")))

    def make_queue(self, vhost, name, durable, owner, auto_delete, arguments):
        return ClassicQueue(vhost.name, name, durable, owner, auto_delete, arguments, host=vhost,
                            persistence=MemoryPersistence())  # fmt: skip

    def recover_queue(self, queue) -> None:
        pass

    def queue_stopped(self, queue) -> None:
        pass

    def background(self, coro, what: str) -> None:
        self.loop.create_task(coro)


@pytest.fixture
def caller():
    loop = asyncio.new_event_loop()
    node = LocalNode(loop)
    yield mreq.Caller(node.vhosts["/"], "guest", Permission(), owner=object(), node_name=node.node_id,
                     projections=node.projections, reply_queues=None)  # fmt: skip
    loop.close()


def call(caller, method, target, body=None):
    return caller.vhost.node.loop.run_until_complete(mreq.handle(caller, method, target, body))


def test_every_routing_error_has_a_status():
    classes = [errors.AddressError, errors.InvalidArgument, errors.NotFound, errors.PreconditionFailed,
               errors.NotAllowed, AccessRefused, ResourceLocked, QueueTypeNotSupported]  # fmt: skip
    assert {c.condition_code for c in classes} <= set(mreq.STATUS_BY_CONDITION)


def test_routes_methods_and_names(caller):
    assert call(caller, "GET", "/nothing")[0] == "404"
    assert call(caller, "PUT", "/queues/a/b")[0] == "404"
    assert call(caller, "POST", "/exchanges/x", {})[0] == "405"
    assert call(caller, None, "/queues/q")[0] == "400"
    assert call(caller, "PUT", "/queues/bad%zz", {})[0] == "400"
    assert call(caller, "PUT", "/queues/a%0Ab", {})[0] == "400"
    status, body = call(caller, "PUT", "/queues/%F0%9F%90%87", {})  # a UTF-8 name, percent-encoded
    assert status == "201" and body["name"] == "\N{RABBIT}"


def test_redeclaration_compares_what_rabbitmq_compares(caller):
    status, body = call(caller, "PUT", "/queues/q", {"arguments": {"x-max-length": 5, "x-app": "a"}})
    assert status == "201" and body["replicas"] == ["warren@unit"] and body["leader"] == "warren@unit"
    # x-queue-type defaults to classic; unknown arguments do not count
    assert call(caller, "PUT", "/queues/q", {"arguments": {"x-max-length": 5, "x-queue-type": "classic",
                                                           "x-app": "b"}})[0] == "200"  # fmt: skip
    status, why = call(caller, "PUT", "/queues/q", {"arguments": {"x-max-length": 6}})
    assert status == "409" and "x-max-length" in why
    assert call(caller, "PUT", "/queues/q", {"arguments": {}})[0] == "409"
    assert call(caller, "PUT", "/queues/q", {"auto_delete": True})[0] == "409"
    assert call(caller, "PUT", "/queues/q", {"exclusive": True})[0] == "400"  # resource-locked
    assert call(caller, "PUT", "/queues/q", {"arguments": {"x-max-length": True}})[0] == "409"


def test_binding_locations_name_bindings_by_their_arguments(caller):
    call(caller, "PUT", "/queues/q", {})
    one = {"x-match": "all", "a": 1, "b": [1, 2]}
    same = {"b": [1, 2], "a": 1, "x-match": "all"}
    assert mreq.args_hash(one) == mreq.args_hash(same) != mreq.args_hash({"x-match": "any", "a": 1, "b": [1, 2]})
    assert mreq.args_hash({}) == ""
    for args in (one, {"x-match": "any", "a": 1}):
        body = {"source": "amq.headers", "destination_queue": "q", "binding_key": "", "arguments": args}
        assert call(caller, "POST", "/bindings", body) == ("204", None)
    status, found = call(caller, "GET", "/bindings?src=amq.headers&dstq=q&key=")
    assert status == "200" and len(found) == 2
    first = next(b for b in found if b["arguments"] == one)
    assert call(caller, "GET", first["location"]) == ("200", first)
    assert call(caller, "DELETE", first["location"]) == ("204", None)
    assert [b["arguments"] for b in call(caller, "GET", "/bindings?src=amq.headers&dstq=q&key=")[1]] == [
        {"x-match": "any", "a": 1}
    ]
    assert call(caller, "GET", "/bindings?src=amq.headers&key=")[0] == "400"


def test_permissions_are_checked_before_anything_changes(caller):
    caller.permission = Permission(configure="^mine", write="^$", read="^$")
    assert call(caller, "PUT", "/queues/yours", {})[0] == "403"
    assert call(caller, "PUT", "/queues/mine", {})[0] == "201"
    assert call(caller, "DELETE", "/queues/mine/messages")[0] == "403"
    caller.permission = None  # no entry for the vhost at all
    assert call(caller, "DELETE", "/queues/mine")[0] == "403"
    assert "mine" in caller.vhost.queues


def test_requests_are_read_whatever_the_order_of_their_sections():
    props = Properties(message_id="m1", to="/queues/q", subject="GET", reply_to="$me")
    buf = bytearray()
    AmqpValue(None).encode_into(buf)  # as the Python client's proton sends a null body
    props.encode_into(buf)
    msg = request_message(bytes(buf))
    assert (msg.message_id, msg.to, msg.subject, msg.reply_to, msg.body) == ("m1", "/queues/q", "GET", "$me", None)


def test_a_reply_carries_status_correlation_and_body():
    msg = Message.from_bytes(reply("id-7", "404", "queue 'q' in vhost '/' not found"))
    assert (msg.correlation_id, msg.subject, msg.body) == ("id-7", "404", "queue 'q' in vhost '/' not found")
    assert msg.application_properties == {"http:response": "1.1"}
    assert Message.from_bytes(reply(None, "204", None)).body is None


def test_post_queues_declares_a_server_named_queue(caller):
    status, body = call(caller, "POST", "/queues", {"durable": False, "exclusive": True})
    assert status == "201" and body["name"].startswith("amq.gen-") and body["exclusive"] is True
    again = call(caller, "POST", "/queues", {})[1]["name"]
    assert again != body["name"] and {body["name"], again} <= set(caller.vhost.queues)
    assert call(caller, "PUT", "/queues/amq.gen-mine", {})[0] == "403"  # the prefix is the server's
    assert call(caller, "GET", "/queues")[0] == "405"
