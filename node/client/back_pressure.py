"""Back-pressure on a client connection's writes: the writing half of
`ConnectionHandler` (node/client/connection.py).

While the client does not take what the node sends, the connection's
consumers stop being fed and deliveries wait in their queues
(`writing_paused`). Paused by the transport (its buffer passed
max_write_buffer) or by what the engine holds for the client."""

from __future__ import annotations

from node.client.links import QueueConsumer


class WriteBackPressure:
    """The back-pressure half of `ConnectionHandler`."""

    def pause_writing(self) -> None:
        """asyncio: the transport buffers more than max_write_buffer."""
        self._transport_paused = True
        self._update_pause()

    def resume_writing(self) -> None:
        self._transport_paused = False
        self._check_output()

    def delivered(self, size: int) -> None:
        """A consumer sent `size` bytes. Every quarter of max_write_buffer they
        are written out at once, not at the end of the loop turn, so the
        transport can push back (pause_writing) in the middle of a queue's
        dispatch of a large credit."""
        self._unflushed += size
        if self._unflushed >= self._write_chunk:
            self._flush()
            self._check_output()

    @property
    def buffered_bytes(self) -> int:
        """What this connection holds for its client, in the transport and the engine."""
        in_transport = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return in_transport + self.engine.output_bytes

    def _check_output(self) -> None:
        limit = self.node.config.max_write_buffer
        held = self.engine.output_bytes
        if held > limit:
            self._holding_too_much = True
        elif self._holding_too_much and held <= limit // 2:
            self._holding_too_much = False
        self._update_pause()

    def _update_pause(self) -> None:
        paused = self._transport_paused or self._holding_too_much
        if paused == self.writing_paused or self._closed:
            return
        self.writing_paused = paused
        for consumer in self._consumers():
            consumer.pause() if paused else consumer.resume()
        self.schedule_flush()

    def _consumers(self) -> list[QueueConsumer]:
        return [link.context for session in self.engine.sessions.values() for link in session.links.values()
                if isinstance(link.context, QueueConsumer)]  # fmt: skip
