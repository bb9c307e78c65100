"""Random command sequences against a simple reference model (hypothesis).

The model is deliberately naive: a dict of every message ever accepted with
its status (ready, out to a consumer, dlx holding, acked, dead, dropped), the
consumers' delivery-count and credit, and the single active consumer. The
machine's choices (which consumer gets which message) are taken from its
effects but checked against the rules; everything it must not choose is
predicted and compared:

- every accepted message is in exactly one place, the same in model and
  machine, and never comes back once acknowledged, dead-lettered or dropped;
- a delivery takes a ready message, from the head (FIFO), to a consumer
  that has credit (and is the active one under single-active-consumer, and
  has the highest priority among those with credit), and says
  first-acquirer exactly when the message was never handed out before;
- messages vanish silently only where the rules allow (no DLX: expired,
  drop-head), and dead letters carry the right reason and strategy;
- publish confirms, credit replies and counters equal the model's, and the
  conservation equation holds after every command;
- a twin state, rebuilt from a snapshot at random points, gives the same
  effects for the same commands, and snapshot round trips give equal states.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from model_bookkeeping import CONFIGS, CONSUMERS, MASK, NODES, C, M, ModelBookkeeping

from queues.quorum import (
    Attach,
    Confirm,
    Credit,
    CreditReply,
    DeadLetterSettled,
    Detach,
    Discard,
    DownConsumersOnNode,
    Enqueue,
    Modify,
    MsgIn,
    Outcome,
    Purge,
    QuorumConfig,
    Return,
    Settle,
    Tick,
    msg_id,
    new_state,
    restore,
    snapshot_bytes,
)
from queues.quorum.machine import MAX_CREDIT


class QuorumModel(ModelBookkeeping, RuleBasedStateMachine):
    @initialize(config=st.sampled_from(range(len(CONFIGS))),
                consumers=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6)), max_size=3))  # fmt: skip
    def setup(self, config, consumers):
        self.args = CONFIGS[config]
        self.cfg = QuorumConfig.from_arguments(self.args)
        self.state = new_state(self.args)
        self.twin = new_state(self.args)
        self.index = 0
        self.now = 1000
        self.clock = 0
        self.corr = 0
        self.msgs: dict[int, M] = {}
        self.cons: dict = {}
        self.sac = None
        self.accepted = self.acked = self.dead = self.dropped = 0
        # Most runs start with consumers that have credit, so that steps go
        # to deliveries and settlements rather than to setting them up.
        for i, (prio, credit) in enumerate(consumers):
            cid = CONSUMERS[i]
            self.cons[cid] = C(prio, 0, False, NODES[i % 2])
            if self.cfg.single_active_consumer and self.sac is None:
                self.sac = cid
            self.run(Attach(cid, prio, self.now, NODES[i % 2]))
            self.cons[cid].credit = credit
            self.run(Credit(cid, 0, credit))

    # ------------------------------------------------------------ model helpers

    @rule(
        msgs=st.lists(
            st.tuples(st.integers(0, 30), st.sampled_from([None, None, 0, 50, 500]), st.booleans()),
            min_size=1,
            max_size=5,
        ),
        advance=st.integers(0, 40),
    )
    def enqueue(self, msgs, advance):
        self.now += advance
        self.clock = max(self.clock, self.now)
        cfg = self.cfg
        index = self.index + 1
        batch, accepted, rejected, fresh = [], [], [], []
        ready_n, ready_b = len(self.ids("ready")), self.ready_bytes()
        dlx_n, dlx_b = len(self.ids("dlx")), self.dlx_bytes()
        for pos, (size, ttl, confirm) in enumerate(msgs):
            self.corr += 1
            corr = self.corr if confirm else None
            batch.append(MsgIn(size, ttl, corr))
            if (cfg.overflow == "reject-publish"
                    and ((cfg.max_length is not None and ready_n + dlx_n + 1 > cfg.max_length)
                         or (cfg.max_length_bytes is not None and ready_b + dlx_b + size > cfg.max_length_bytes))):  # fmt: skip
                if corr is not None:
                    rejected.append(corr)
                continue
            ttls = [t for t in (ttl, cfg.message_ttl) if t is not None]
            x = M(size, self.now + min(ttls) if ttls else None)
            mid = msg_id(index, pos)
            self.msgs[mid] = x
            fresh.append(mid)
            ready_n += 1
            ready_b += size
            self.accepted += 1
            if corr is not None:
                accepted.append(corr)
        fx = self.run(Enqueue(tuple(batch), self.now), fresh=set(fresh))
        confirms = [e for e in fx if isinstance(e, Confirm)]
        expected = []
        if accepted:
            expected.append(Confirm(tuple(accepted), Outcome.ACCEPTED))
        if rejected:
            expected.append(Confirm(tuple(rejected), Outcome.REJECTED))
        assert confirms == expected

    @rule(cid=st.sampled_from(CONSUMERS), prio=st.integers(0, 2), node=st.sampled_from(NODES),
          dc=st.sampled_from([0, 7, MASK - 2]), settled=st.sampled_from([False, False, False, True]))  # fmt: skip
    def attach(self, cid, prio, node, dc, settled):
        if cid not in self.cons:
            self.cons[cid] = C(prio, dc, settled, node)
            if self.cfg.single_active_consumer and self.sac is None:
                self.sac = cid
        self.run(Attach(cid, prio, self.now, node, dc, settled))

    @rule(cid=st.sampled_from(CONSUMERS), really=st.integers(0, 2))
    def detach(self, cid, really):
        if really:  # keeps consumers around long enough to matter
            return
        if cid in self.cons:
            self.remove_consumer(cid)
        self.run(Detach(cid))

    @rule(node=st.sampled_from(NODES), really=st.integers(0, 3))
    def node_down(self, node, really):
        if really:
            return
        for cid in [k for k, c in self.cons.items() if c.node == node]:
            self.remove_consumer(cid)
        self.run(DownConsumersOnNode(node))

    @rule(data=st.data(), credit=st.integers(0, 8), drain=st.sampled_from([False, False, True]),
          echo=st.booleans(), lag=st.sampled_from([0, 0, 0, 1, 3, None]))  # fmt: skip
    def credit(self, data, credit, drain, echo, lag):
        cid = data.draw(st.sampled_from(list(self.cons) + CONSUMERS[:1]))  # mostly attached ones
        c = self.cons.get(cid)
        rcv = None
        if c is not None:
            rcv = None if lag is None else (c.dc - lag) & MASK
            behind = 0 if lag is None else lag
            c.credit = max(0, min(credit - behind, MAX_CREDIT))

        def post():
            if c is not None and drain and c.credit > 0:
                c.dc = (c.dc + c.credit) & MASK
                c.credit = 0

        fx = self.run(Credit(cid, rcv if c is not None else 0, credit, drain, echo), post=post)
        replies = [e for e in fx if isinstance(e, CreditReply)]
        assert len(replies) == (1 if c is not None and (drain or echo) else 0)
        if replies:
            assert replies[0].drain == drain and replies[0].consumer_id == cid
            assert fx[-1] is replies[0]

    def _pick(self, data, cid) -> tuple[int, ...]:
        held = self.ids("out", cid)
        if held and data.draw(st.booleans()):
            return tuple(held)
        others = [m for m in self.msgs if m not in held][-3:]
        pool = held + others + [12345]
        return tuple(data.draw(st.lists(st.sampled_from(pool), max_size=4)))

    @precondition(lambda self: self.cons)
    @rule(data=st.data())
    def settle(self, data):
        cid = data.draw(st.sampled_from(list(self.cons)))
        ids = self._pick(data, cid)
        for mid in ids:
            x = self.msgs.get(mid)
            if x is not None and x.status == "out" and x.holder == cid:
                x.status, x.holder = "acked", None
                self.acked += 1
        self.run(Settle(cid, ids))

    @precondition(lambda self: self.cons)
    @rule(data=st.data())
    def release(self, data):
        cid = data.draw(st.sampled_from(list(self.cons)))
        ids = self._pick(data, cid)
        for mid in ids:
            x = self.msgs.get(mid)
            if x is not None and x.status == "out" and x.holder == cid:
                x.status, x.holder, x.acq = "ready", None, x.acq + 1
        self.run(Return(cid, ids))

    @precondition(lambda self: self.cons)
    @rule(data=st.data())
    def reject(self, data):
        cid = data.draw(st.sampled_from(list(self.cons)))
        ids = self._pick(data, cid)
        for mid in ids:
            x = self.msgs.get(mid)
            if x is not None and x.status == "out" and x.holder == cid:
                x.status, x.holder = "limbo", "rejected"
        self.run(Discard(cid, ids))

    @precondition(lambda self: self.cons)
    @rule(data=st.data(), failed=st.booleans(), undeliverable=st.sampled_from([False, False, True]),
          ann=st.sampled_from([None, {"x-opt-a": 1}, {"x-opt-b": "z", "x-opt-a": 2}]))  # fmt: skip
    def modify(self, data, failed, undeliverable, ann):
        cid = data.draw(st.sampled_from(list(self.cons)))
        ids = self._pick(data, cid)
        limit = self.cfg.delivery_limit
        for mid in ids:
            x = self.msgs.get(mid)
            if x is None or x.status != "out" or x.holder != cid:
                continue
            if ann:
                x.ann = {**(x.ann or {}), **ann}
            x.failed += failed
            x.acq += 1
            x.holder = None
            if undeliverable:
                x.status, x.holder = "limbo", "rejected"
            elif limit is not None and x.failed > limit:
                x.status, x.holder = "limbo", "delivery_limit"
            else:
                x.status = "ready"
        self.run(Modify(cid, ids, failed, undeliverable, ann))

    @rule(advance=st.integers(0, 300))
    def tick(self, advance):
        self.now += advance
        self.clock = max(self.clock, self.now)
        self.run(Tick(self.now))

    @precondition(lambda self: self.ids("dlx"))
    @rule(data=st.data())
    def dlx_settled(self, data):
        ids = tuple(data.draw(st.lists(st.sampled_from(self.ids("dlx") + [999]), max_size=3)))
        for mid in ids:
            x = self.msgs.get(mid)
            if x is not None and x.status == "dlx":
                x.status = "dead"
                self.dead += 1
        self.run(DeadLetterSettled(ids))

    @rule(really=st.integers(0, 4))
    def purge(self, really):
        if not really:
            self.run(Purge())

    @rule()
    def snapshot_round_trip(self):
        data = snapshot_bytes(self.state)
        restored = restore(data)
        assert restored == self.state
        assert snapshot_bytes(restored) == data
        self.twin = restored  # an equal state built another way must go on identically

    @invariant()
    def twin_is_equal(self):
        if hasattr(self, "state"):
            assert self.twin == self.state


TestQuorumModel = QuorumModel.TestCase
TestQuorumModel.settings = settings(
    max_examples=80, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class QuorumModelLong(QuorumModel):
    pass


TestQuorumModelLong = pytest.mark.timeout(1800)(pytest.mark.slow(QuorumModelLong.TestCase))
TestQuorumModelLong.settings = settings(
    max_examples=600, stateful_step_count=80, deadline=None, suppress_health_check=list(HealthCheck)
)
