"""pysyncobj's view of the node transport: one `GroupTransport` per Raft group.

A GroupTransport is the pysyncobj `Transport` of one SyncObj (autoTick=False)
and the only part of the cluster transport that knows pysyncobj. It keeps the
group's members (pysyncobj Nodes whose ids are cluster addresses), encodes
what pysyncobj sends with raft/grpc_codec.py and queues it on the
NodeTransport's link to the peer; the NodeTransport hands it what arrives for
the group and tells it when a peer's link goes up or down.

Build it either way (both give the same object):

    SyncObj(self_id, peer_ids, conf, transportClass=node_transport.transport_class(group))
    SyncObj(self_id, peer_ids, conf, transport=GroupTransport(node_transport, group, self_id, peer_ids))

What it implements of pysyncobj's Transport, as syncobj.py 0.3.17 calls it:
the five set*Callback methods (setOnNodeConnectedCallback also reports the
peers already up, since pysyncobj sets it after building the transport),
send, addNode/dropNode (membership changes), ready/tryGetReady/waitReady
(always ready: the NodeTransport is started before any group), destroy.
Not supported: read-only nodes (Warren has none) and pysyncobj's utility
messages (syncobj_admin), which need pysyncobj's own TCP port.

The leader outlives its own removal here: pysyncobj applies a membership
change when a follower appends it, so a member catching up from an old
log (a node that has just joined) drops a leader that the log removed and
added back later, stops hearing it, and never reaches the entry that adds
it back (a five-node chaos run, seed 32: the joining node waited forever).
As in Raft, where a server takes AppendEntries from the leader of its term
whatever its configuration, the peer this group last took AppendEntries
from (of the newest term seen) stays reachable when dropped ("lingering")
until another peer leads, this node leads, or it is added back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pysyncobj.node import Node
from pysyncobj.transport import Transport

from .grpc_codec import MessageError, decode, encode, reassemble_entry
from .proto import cluster_pb2

if TYPE_CHECKING:
    from .transport import NodeTransport

__all__ = ["GroupTransport"]

log = logging.getLogger(__name__)

RAFT = cluster_pb2.Envelope.RAFT


class GroupTransport(Transport):
    """The pysyncobj Transport of one Raft group; `self_node` must be this node's id."""

    def __init__(
        self, transport: NodeTransport, group: str, self_node: Node | str | None, other_nodes: Iterable[Node | str]
    ) -> None:
        super().__init__(None, self_node, other_nodes)
        if self_node is None:
            raise ValueError("read-only pysyncobj nodes are not supported")
        self_id = self_node.id if isinstance(self_node, Node) else self_node
        if self_id != transport.node_id:
            raise ValueError(f"group {group!r}: self node {self_id!r} is not this node ({transport.node_id!r})")
        if group in transport._groups:
            raise ValueError(f"group {group!r} already has a transport on this node")
        self.group = group
        self._nt = transport
        self._members: dict[str, Node] = {}
        self._connected: set[str] = set()  # peers reported to pysyncobj as connected
        self._transmissions: dict[str, bytearray] = {}  # peer -> chunks of an outgoing large entry
        self._leader: str | None = None  # the peer this group last took AppendEntries from
        self._leader_term = 0  # and its term (a stale leader's AppendEntries does not count)
        self._lingering: set[str] = set()  # dropped by pysyncobj while it led: still reachable
        transport._groups[group] = self
        for node in other_nodes:
            self.addNode(node)

    # -- pysyncobj Transport API ---------------------------------------------------------

    @property
    def ready(self) -> bool:
        return True  # SyncObj(autoTick=False) spins on tryGetReady until ready

    def setOnNodeConnectedCallback(self, callback) -> None:  # noqa: N802
        super().setOnNodeConnectedCallback(callback)
        # pysyncobj sets its callbacks after creating the transport: report the
        # peers that are already up now, so none is missed.
        if callback is not None:
            for peer in list(self._members):
                if self._nt.is_connected(peer):
                    self._peer_up(peer)

    def addNode(self, node: Node | str) -> None:  # noqa: N802
        if not isinstance(node, Node):
            node = Node(node)
        if node.id in self._lingering:
            self._lingering.discard(node.id)  # added back: a member again
            return
        if node.id == self._nt.node_id or node.id in self._members:
            return
        self._members[node.id] = node
        self._nt._groups_by_peer.setdefault(node.id, set()).add(self)
        self._nt._acquire(node.id)
        if self._onNodeConnectedCallback is not None and self._nt.is_connected(node.id):
            self._peer_up(node.id)

    def dropNode(self, node: Node | str) -> None:  # noqa: N802
        peer = node.id if isinstance(node, Node) else node
        if peer == self._leader and peer in self._members:
            self._lingering.add(peer)  # see the module docstring
            return
        self._drop(peer)

    def _drop(self, peer: str) -> None:
        self._lingering.discard(peer)
        if self._members.pop(peer, None) is None:
            return
        self._connected.discard(peer)
        self._transmissions.pop(peer, None)
        groups = self._nt._groups_by_peer.get(peer)
        if groups is not None:
            groups.discard(self)
        self._nt._release(peer)

    def isConnected(self, node: Node | str) -> bool:  # noqa: N802
        peer = node.id if isinstance(node, Node) else node
        return peer in self._members and self._nt.is_connected(peer)

    def send(self, node: Node, message: dict) -> bool:
        peer = node.id
        link = self._nt._links.get(peer)
        if peer not in self._members or link is None or not link.up:
            return False
        if message.get("type") == "append_entries":
            if self._leader is not None:  # this node leads: a lingering old leader goes
                self._leader, self._leader_term = None, message.get("term", 0)
                self._forget_lingering()
            if "transmission" in message:
                message = self._transmission(peer, message)
                if message is None:
                    return True
            if message.get("entries") and self._nt.backlog(peer) > self._nt.options.max_outbox_bytes // 4:
                # The peer is far behind (a follower catching up): pysyncobj would queue its whole
                # missing log at once, and past max_outbox_bytes the link, every group's, is reset.
                # Held back, these entries are as lost; the follower's answer to the next
                # AppendEntries rewinds the leader to what it has, and the rest follows later.
                self._nt.stats.entries_held_back += 1
                return True
        try:
            payload = encode(message)
        except MessageError as e:
            log.error("group %r: not sending a message to %s: %s", self.group, peer, e)
            return False
        # a leader's AppendEntries need not wait for this node's own write (raft/outbound.py)
        gated = message.get("type") != "append_entries"
        return self._nt.outbound.enqueue(link, RAFT, self.group, payload, gated=gated)

    def destroy(self) -> None:
        for name in ("MessageReceived", "NodeConnected", "NodeDisconnected"):
            getattr(self, f"setOn{name}Callback")(None)
        self.setOnReadonlyNodeConnectedCallback(None)
        self.setOnReadonlyNodeDisconnectedCallback(None)
        for peer in list(self._members):
            self._drop(peer)
        if self._nt._groups.get(self.group) is self:
            del self._nt._groups[self.group]

    # -- from NodeTransport ------------------------------------------------------------------

    def _peer_up(self, peer: str) -> None:
        if peer in self._members and peer not in self._connected and self._onNodeConnectedCallback is not None:
            self._connected.add(peer)
            self._onNodeConnected(self._members[peer])

    def _peer_down(self, peer: str) -> None:
        self._transmissions.pop(peer, None)
        if peer in self._connected:
            self._connected.discard(peer)
            self._onNodeDisconnected(self._members[peer])

    def _deliver(self, peer: str, payload: bytes) -> None:
        node = self._members.get(peer)
        if node is None:
            self._nt.stats.dropped_not_member += 1
            return
        try:
            message = decode(payload)
        except MessageError as e:
            self._nt.stats.rejected_messages += 1
            log.warning("group %r: rejected a message from %s: %s", self.group, peer, e)
            return
        if message.get("type") == "append_entries" and peer != self._leader and \
                message.get("term", 0) >= self._leader_term:  # fmt: skip
            self._leader, self._leader_term = peer, message.get("term", 0)
            if self._lingering:  # another peer leads: a lingering old leader goes
                self._forget_lingering()
        self._onMessageReceived(node, message)

    def _forget_lingering(self) -> None:
        for peer in list(self._lingering):
            if peer != self._leader:
                self._drop(peer)

    def _transmission(self, peer: str, message: dict) -> dict | None:
        """Turn pysyncobj's chunks of one pickled large entry into a plain append_entries.

        pysyncobj sends an entry larger than appendEntriesBatchSizeBytes as
        pickle chunks (start, process..., finish) that the follower unpickles.
        We collect the chunks of OUR OWN pickle and send the entry itself;
        the follower gets an ordinary one-entry append_entries. Returns None
        while chunks are being collected (and drops chunks without a start).
        """
        kind = message.get("transmission")
        data = message.get("data")
        if not isinstance(data, bytes | bytearray):
            return None
        if kind == "start":
            self._transmissions[peer] = bytearray(data)
            return None
        buf = self._transmissions.get(peer)
        if buf is None:
            return None  # no start seen (or its peer went down meanwhile)
        buf += data
        if kind != "finish":
            return None
        # pysyncobj 0.3.17 decides 'finish' by the command's length, not the
        # pickle's, so when the pickle crosses one more chunk boundary it sends
        # 'finish' twice and the first is short (stock followers then fail to
        # unpickle, forever). A prefix of a pickle never loads, so keep
        # collecting until the buffer loads as a whole; 'start' resets it.
        try:
            entry = reassemble_entry(bytes(buf))
        except MessageError:
            return None
        del self._transmissions[peer]
        return {
            "type": "append_entries",
            "term": message["term"],
            "commit_index": message["commit_index"],
            "entries": [entry],
            "prevLogIdx": message["prevLogIdx"],
            "prevLogTerm": message["prevLogTerm"],
        }
