"""Issue 14, row 12, over the /management node: names and queue arguments
out of bounds are a 400 with a reason (metadata/limits.py)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from rmq_client import connection, request

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker(broker_factory):
    return broker_factory(http_port=-1, metrics_port=-1)


def test_names_and_arguments_out_of_bounds(broker):
    with connection(broker.port) as conn:
        m = conn.management()
        for path, body in (("/queues/{}", {"durable": True}), ("/exchanges/{}", {"type": "direct"})):
            status, reason = request(m, "PUT", path.format(quote("é" * 128)), body)
            assert status == 400 and "255" in reason
            status, reason = request(m, "PUT", path.format("nul%00name"), body)
            assert status == 400 and "U+0000" in reason
            status, reason = request(m, "PUT", path.format("tab%09"), body)
            assert status == 400 and "U+0009" in reason
            assert request(m, "PUT", path.format(quote("é" * 127)), body)[0] in (200, 201, 204)
        status, reason = request(m, "PUT", "/queues/ttl", {"durable": True, "arguments": {"x-message-ttl": 2**40}})
        assert status == 400 and "x-message-ttl" in reason
        assert request(m, "PUT", "/queues/ttl", {"durable": True, "arguments": {"x-message-ttl": 60_000}})[0] in (200, 201)
