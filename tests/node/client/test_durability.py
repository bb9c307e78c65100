"""Durable messages survive kill -9 once confirmed; SIGTERM closes clients
with amqp:connection:forced."""

from __future__ import annotations

import json

from confirming_publisher import ConfirmingPublisher
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection


def write_definitions(path, *queues):
    path.write_text(json.dumps({"queues": [{"name": q, "durable": True} for q in queues]}))
    return path


def consume_all(url, address):
    conn = BlockingConnection(url, timeout=10)
    r = conn.create_receiver(address, credit=500)
    ids = []
    while True:
        try:
            m = r.receive(timeout=2)
        except Exception:
            break
        ids.append(m.id)
        r.accept()
    conn.close()
    return ids


def test_kill_9_loses_no_confirmed_message(tmp_path, broker_process_factory):
    data = tmp_path / "data"
    defs = write_definitions(tmp_path / "defs.json", "durable-q")
    broker = broker_process_factory(data, definitions=defs)
    pub = ConfirmingPublisher(broker.url, "/queues/durable-q", total=20000, kill_after=3000, broker=broker)
    Container(pub).run()
    assert pub.killed and len(pub.confirmed) >= 3000

    restarted = broker_process_factory(data)
    recovered = consume_all(restarted.url, "/queues/durable-q")
    missing = pub.confirmed - {int(i) for i in recovered}
    assert not missing, f"{len(missing)} confirmed messages lost, e.g. {sorted(missing)[:5]}"
    assert len(recovered) == len(set(recovered)), "recovery duplicated messages"
    assert set(int(i) for i in recovered) <= set(range(pub.sent)), "recovered a message never sent"


def test_sigterm_closes_connections_with_connection_forced(tmp_path, broker_process_factory):
    broker = broker_process_factory(tmp_path / "data")
    seen = {}

    class Client(MessagingHandler):
        def on_start(self, event):
            event.container.connect(broker.url, reconnect=False)

        def on_connection_opened(self, event):
            broker.proc.terminate()  # SIGTERM

        def on_connection_error(self, event):
            cond = event.connection.remote_condition
            seen["condition"] = cond.name if cond else None
            event.connection.close()

        def on_connection_remote_close(self, event):
            cond = event.connection.remote_condition
            seen.setdefault("condition", cond.name if cond else None)
            event.connection.close()

    Container(Client()).run()
    assert seen.get("condition") == "amqp:connection:forced"
    assert broker.proc.wait(20) == 0
