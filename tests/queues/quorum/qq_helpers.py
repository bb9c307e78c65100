"""A small driver around the quorum queue machine for the tests."""

from __future__ import annotations

from typing import Any

from queues.quorum import (
    Attach,
    Confirm,
    Credit,
    DeadLetter,
    Deliver,
    DeliveredMessage,
    Enqueue,
    MsgIn,
    apply,
    consumer_link,
    msg_id,
    new_state,
    overview,
)


def conservation_holds(state) -> bool:
    k = state.counters
    depth = state.ready_count + state.checked_count + len(state.dlx)
    return k.enqueued == k.acknowledged + depth + k.dead_lettered + k.dropped


class Q:
    """Applies commands to one state, keeps the last effects, checks the
    conservation equation after every command."""

    def __init__(self, arguments: dict | None = None, now: int = 1000) -> None:
        self.state = new_state(arguments or {})
        self.now = now
        self.fx: list = []
        self._corr = 0

    def do(self, command: Any) -> list:
        self.state, self.fx = apply(command, self.state)
        assert conservation_holds(self.state), overview(self.state)
        return self.fx

    # -- publishing
    def publish(self, n: int = 1, size: int = 10, ttl: int | None = None, confirm: bool = True) -> list[int]:
        """Enqueues n messages in one batch; returns the ids of all n
        (accepted or not: see the Confirm effects)."""
        msgs = []
        for _ in range(n):
            self._corr += 1
            msgs.append(MsgIn(size, ttl, self._corr if confirm else None))
        self.do(Enqueue(tuple(msgs), self.now))
        index = self.state.last_index
        return [msg_id(index, pos) for pos in range(n)]

    # -- consuming
    def attach(self, cid: Any, credit: int | None = None, priority: int = 0, **kw: Any) -> list:
        self.do(Attach(cid, priority, self.now, **kw))
        if credit is not None:
            return self.credit(cid, credit)
        return self.fx

    def credit(self, cid: Any, credit: int, drain: bool = False, echo: bool = False, dc: Any = "auto") -> list:
        if dc == "auto":
            link = consumer_link(self.state, cid)
            dc = link[0] if link else 0
        return self.do(Credit(cid, dc, credit, drain, echo))

    # -- reading effects
    def effects(self, kind: type) -> list:
        return [e for e in self.fx if isinstance(e, kind)]

    def delivered(self, cid: Any = None) -> list[DeliveredMessage]:
        out: list[DeliveredMessage] = []
        for e in self.effects(Deliver):
            if cid is None or e.consumer_id == cid:
                out.extend(e.messages)
        return out

    def delivered_ids(self, cid: Any = None) -> list[int]:
        return [d.msg_id for d in self.delivered(cid)]

    def delivered_to(self) -> list[tuple[Any, int]]:
        """(consumer, msg id) in the order the effects list them."""
        return [(e.consumer_id, d.msg_id) for e in self.effects(Deliver) for d in e.messages]

    def dead(self) -> list[DeadLetter]:
        return self.effects(DeadLetter)

    def confirms(self) -> list[Confirm]:
        return self.effects(Confirm)

    @property
    def counters(self):
        return self.state.counters
