"""In-process pysyncobj clusters over an in-memory network, for tests/raft.

Every member is driven the way a Warren node drives its groups: `step()`
delivers each member's inbox and calls `doTick(0)`, then flushes each
member's DurableLog once (the group commit), which releases the messages
the member queued during the step.

Kinds of member, so a test can run the same scenario on the stock library
and on Warren's fixes:

- "ours":      RaftGroup (raft/group.py) + DurableLog + make_conf
- "stock":     pysyncobj's SyncObj with its FileJournal and pickled fullDumpFile
- "stock-mem": pysyncobj's SyncObj, in-memory journal
- "safe-mem":  SafeSyncObj (raft/patches.py), in-memory journal
- "stock-durable": pysyncobj's SyncObj with Warren's DurableLog journal and gate
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj import pickle as pysyncobj_pickle
from pysyncobj.node import Node
from pysyncobj.transport import Transport

from amqp import codec
from raft import patches
from raft.config import make_conf
from raft.group import RaftGroup
from raft.journal import DurableLog
from raft.patches import SafeSyncObj
from raft.records import command
from raft.status import ProposalOutcome

# Fast timings for tests: elections within ~0.1-0.2 s.
FAST = {
    "appendEntriesPeriod": 0.02,
    "raftMinTimeout": 0.1,
    "raftMaxTimeout": 0.2,
    "leaderFallbackTimeout": 0.5,
    "connectionTimeout": 0.5,
}
# what RaftGroup reports, for the stock kinds' FAIL_REASON ints
STOCK_OUTCOMES = {getattr(FAIL_REASON, o.name): o for o in ProposalOutcome}


@command("test.append", version=1)
@dataclass(frozen=True)
class Append:
    value: int


class ListMachine:
    """Appends every value it is given; its snapshot is the AMQP list of them."""

    def __init__(self) -> None:
        self.values: list[int] = []

    def apply(self, record: Append, index: int) -> int:
        self.values.append(record.value)
        return len(self.values)

    def snapshot(self) -> bytes:
        return codec.dumps(self.values)

    def restore(self, data: bytes) -> None:
        self.values = [int(v) for v in codec.loads(data)]


class StockApp(SyncObj):
    """pysyncobj as shipped: a @replicated method, pickled commands and snapshots."""

    @replicated
    def append(self, value):
        self.values.append(value)
        return len(self.values)


class SafeApp(SafeSyncObj):
    """The same application on Warren's SafeSyncObj."""

    @replicated
    def append(self, value):
        self.values.append(value)
        return len(self.values)


class MemNet:
    """Delivers pickled messages between MemTransports; tests can tap or block links."""

    def __init__(self) -> None:
        self.transports: dict[str, MemTransport] = {}
        self.blocked: set[tuple[str, str]] = set()
        self.taps: list[Callable[[str, str, dict], None]] = []

    def register(self, t: MemTransport) -> None:
        self.transports[t.id] = t
        for other in self.transports.values():
            if other is not t:
                other._connected(t.id)
                t._connected(other.id)

    def unregister(self, t: MemTransport) -> None:
        if self.transports.get(t.id) is t:
            del self.transports[t.id]
            for other in self.transports.values():
                other._disconnected(t.id)

    def post(self, src: str, dst: str, data: bytes) -> None:
        target = self.transports.get(dst)
        if target is None or (src, dst) in self.blocked:
            return
        if self.taps:
            message = pysyncobj_pickle.loads(data)
            for tap in self.taps:
                tap(src, dst, message)
        target.inbox.append((src, data))


class MemTransport(Transport):
    """A pysyncobj Transport over MemNet; sends pass through `gate` (a DurableLog) if given."""

    def __init__(self, net: MemNet, node_id: str, gate: DurableLog | None = None) -> None:
        super().__init__(None, None, None)
        self.net = net
        self.id = node_id
        self.gate = gate
        self.inbox: list[tuple[str, bytes]] = []
        self.sent: list[tuple[str, dict]] = []  # every message handed to the network, in order
        self.on_sent: Callable[[str, dict], None] | None = None  # called as each one leaves
        self.peers: set[str] = set()

    def start(self, peers) -> None:
        self.peers = {p.id if isinstance(p, Node) else p for p in peers}
        self.net.register(self)

    def _connected(self, node_id: str) -> None:
        if node_id in self.peers:
            self._onNodeConnected(Node(node_id))

    def _disconnected(self, node_id: str) -> None:
        if node_id in self.peers:
            self._onNodeDisconnected(Node(node_id))

    def addNode(self, node):  # noqa: N802
        self.peers.add(node.id)
        if node.id in self.net.transports:
            self._onNodeConnected(node)

    def dropNode(self, node):  # noqa: N802
        self.peers.discard(node.id)

    def send(self, node, message):
        if node.id not in self.net.transports:
            return False
        data = pysyncobj_pickle.dumps(message)

        def deliver() -> None:
            self.sent.append((node.id, message))
            if self.on_sent is not None:
                self.on_sent(node.id, message)
            self.net.post(self.id, node.id, data)

        if self.gate is not None:
            self.gate.after_durable(deliver)
        else:
            deliver()
        return True

    def deliver_inbox(self) -> int:
        inbox, self.inbox = self.inbox, []
        for src, data in inbox:
            self._onMessageReceived(Node(src), pysyncobj_pickle.loads(data))
        return len(inbox)

    def destroy(self):
        self.net.unregister(self)


class Member:
    def __init__(self, name: str, kind: str, obj: SyncObj, transport: MemTransport, log: DurableLog | None):
        self.name = name
        self.kind = kind
        self.obj = obj
        self.transport = transport
        self.log = log

    @property
    def values(self) -> list[int]:
        if isinstance(self.obj, RaftGroup):
            return self.obj.machine.values
        return self.obj.values

    def propose(self, value: int, callback=None) -> None:
        """`callback(result, ProposalOutcome)`, whichever kind runs (stock reports FAIL_REASON ints)."""
        if isinstance(self.obj, RaftGroup):
            self.obj.propose(Append(value), callback=callback)
        elif callback is None:
            self.obj.append(value)
        else:
            self.obj.append(value, callback=lambda res, err: callback(res, STOCK_OUTCOMES[err]))

    @property
    def raft_log(self):
        return self.obj._SyncObj__raftLog

    def last_index(self) -> int:
        return self.raft_log[-1][1]

    def destroy(self) -> None:
        self.obj.destroy()
        if self.log is not None:
            self.log.close()


def build(
    kind: str,
    name: str,
    names: list[str],
    net: MemNet,
    root: Path | None = None,
    *,
    log: DurableLog | None = None,
    conf: dict | None = None,
) -> Member:
    """Build member `name` of a cluster of `names`, its files under root/name."""
    peers = [n for n in names if n != name]
    fields = dict(FAST)
    fields.update(conf or {})
    own_log = None
    if kind == "stock-durable":
        # the stock SyncObj with Warren's journal and gate: isolates what
        # SafeSyncObj changes on top of them
        assert root is not None
        patches.install()  # the stock SyncObj takes the journal only with the createJournal hook
        if log is None:
            log = own_log = DurableLog(root / name / "raft")
        transport = MemTransport(net, name, log)
        c = make_conf(root / name / "group", log.journal("g"), **fields)
        obj = StockApp(name, peers, c, transport=transport, nodeClass=Node)
        obj.values = []  # after __init__, so that pysyncobj snapshots it
    elif kind == "ours":
        assert root is not None
        if log is None:
            log = own_log = DurableLog(root / name / "raft")
        gate = log
        transport = MemTransport(net, name, gate)
        c = make_conf(root / name / "group", log.journal("g"), **fields)
        obj = RaftGroup(name, peers, c, ListMachine(), transport=transport)
    else:
        transport = MemTransport(net, name)
        fields.setdefault("autoTick", False)
        fields.setdefault("dynamicMembershipChange", True)
        fields.setdefault("useFork", False)
        if kind == "stock":
            assert root is not None
            (root / name).mkdir(parents=True, exist_ok=True)
            fields.setdefault("journalFile", str(root / name / "journal"))
            fields.setdefault("fullDumpFile", str(root / name / "dump"))
        cls = {"stock": StockApp, "stock-mem": StockApp, "safe-mem": SafeApp}[kind]
        obj = cls(name, peers, SyncObjConf(**fields), transport=transport, nodeClass=Node)
        obj.values = []  # after __init__, so that pysyncobj snapshots it
    transport.start(peers)
    return Member(name, kind, obj, transport, own_log if own_log is not None else log)


class Cluster:
    def __init__(self, members: list[Member]) -> None:
        self.members = members

    @classmethod
    def start(cls, kind: str, root: Path | None, names=("a", "b", "c"), net: MemNet | None = None, **conf) -> Cluster:
        net = net or MemNet()
        names = list(names)
        cluster = cls([build(kind, n, names, net, root, conf=conf) for n in names])
        cluster.net = net
        return cluster

    def __getitem__(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def step(self) -> None:
        for m in self.members:
            m.transport.deliver_inbox()
            m.obj.doTick(0)
        for m in self.members:
            if m.log is not None:
                m.log.flush()

    def run_until(self, cond: Callable[[], object], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError("condition not reached")
            self.step()

    def leader(self) -> Member | None:
        leaders = [m for m in self.members if m.obj._isLeader()]
        return leaders[0] if len(leaders) == 1 else None

    def wait_leader(self, timeout: float = 10.0) -> Member:
        self.run_until(self.leader, timeout)
        return self.leader()

    def commit(self, values, timeout: float = 20.0) -> list[int]:
        """Propose `values` on the leader and step until every one is committed."""
        leader = self.wait_leader()
        done: dict[int, ProposalOutcome] = {}
        for v in values:
            leader.propose(v, callback=lambda res, err, v=v: done.__setitem__(v, err))
        self.run_until(lambda: len(done) == len(values), timeout)
        return [v for v in values if done[v] is ProposalOutcome.SUCCESS]

    def destroy(self) -> None:
        for m in self.members:
            m.destroy()
