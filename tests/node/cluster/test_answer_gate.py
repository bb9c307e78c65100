"""node/vhosts/answer_gate.py over two real NodeTransports on loopback: a
peer's messages wait while this node has no stream back to it, are handled
in order once it has one, and make it cut the peer's stream if none comes."""

from __future__ import annotations

import asyncio

import uvloop
from eventually import until  # tests/support/

from node.vhosts import answer_gate
from node.vhosts.answer_gate import AnswerGate
from raft.transport import NodeTransport, TransportOptions

OPTIONS = TransportOptions(backoff_initial=0.01, backoff_max=0.2)


async def pair() -> tuple[NodeTransport, NodeTransport]:
    a, b = (NodeTransport(listen="127.0.0.1:0", secret="gate-secret", options=OPTIONS) for _ in range(2))
    await a.start()
    await b.start()
    a.add_peer(b.node_id)
    b.add_peer(a.node_id)
    await until(lambda: a.is_connected(b.node_id) and b.is_connected(a.node_id), "both streams up")
    return a, b


def test_messages_wait_for_the_stream_back_and_are_handled_in_order(monkeypatch):
    async def main():
        a, b = await pair()
        handled: list[bytes] = []
        gate = AnswerGate(a, asyncio.get_running_loop(), lambda peer, m: handled.append(m), a.add_peer)

        def on_message(peer: str, channel: str, payload: bytes) -> None:
            if gate.admit(peer, [payload]):
                handled.append(payload)

        a.on_node_message = on_message
        try:
            a.partition([b.node_id], inbound=False)  # a cannot answer b; b's stream to a stays
            b.send_node_message(a.node_id, "x", b"1")
            b.send_node_message(a.node_id, "x", b"2")
            await until(lambda: gate._held, "b's messages held")
            assert handled == []
            a.heal()
            await until(lambda: len(handled) == 2, "the held messages handled")
            b.send_node_message(a.node_id, "x", b"3")
            await until(lambda: len(handled) == 3, "a message with both streams up")
            assert handled == [b"1", b"2", b"3"]

            # no stream back within HOLD_WAIT: b's stream is cut, its message dropped
            monkeypatch.setattr(answer_gate, "HOLD_WAIT", 0.2)
            epoch = b.epoch_to(a.node_id)
            a.partition([b.node_id], inbound=False)
            b.send_node_message(a.node_id, "x", b"4")
            await until(lambda: b.epoch_to(a.node_id) != epoch, "b's stream to a cut")
            await until(lambda: not gate._held, "the held message dropped")
            a.heal()
            await until(lambda: a.is_connected(b.node_id), "healed")
            assert handled == [b"1", b"2", b"3"]
        finally:
            await a.close()
            await b.close()

    uvloop.run(main())
