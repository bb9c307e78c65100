"""A proton publisher that kills its broker mid-way: the crash tests' workload."""

from __future__ import annotations

from proton import Message
from proton.handlers import MessagingHandler


class ConfirmingPublisher(MessagingHandler):
    """Publishes durable messages numbered from `first`, up to `window`
    unsettled, and kills the broker once `kill_after` of them were accepted
    (None: closes once all `total` were)."""

    def __init__(self, url, address, total, kill_after, broker, window=200, first=0):
        super().__init__(auto_settle=True)
        self.url, self.address, self.total = url, address, total
        self.kill_after, self.broker, self.window = kill_after, broker, window
        self.first = first
        self.sent = 0
        self.confirmed: set[int] = set()
        self.ids: dict = {}  # delivery tag -> message id
        self.killed = False

    def on_start(self, event):
        self.conn = event.container.connect(self.url, reconnect=False)
        event.container.create_sender(self.conn, self.address)

    def on_sendable(self, event):
        self._pump(event.sender)

    def _pump(self, sender):
        while sender.credit and self.sent < self.total and self.sent - len(self.confirmed) < self.window:
            n = self.first + self.sent
            delivery = sender.send(Message(id=n, body=f"m{n}", durable=True))
            self.ids[delivery.tag] = n
            self.sent += 1

    def on_accepted(self, event):
        self.confirmed.add(self.ids.pop(event.delivery.tag))
        if self.kill_after is None:
            if len(self.confirmed) == self.total:
                event.connection.close()
                return
        elif not self.killed and len(self.confirmed) >= self.kill_after:
            self.killed = True
            self.broker.kill9()
            event.connection.close()
            return
        self._pump(event.link)

    def on_transport_error(self, event):
        if event.connection is not None:
            event.connection.close()

    def on_disconnected(self, event):
        event.container.stop()
