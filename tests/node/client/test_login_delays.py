"""The delay before logins from an address whose logins failed
(node/client/login.py), on an injected clock."""

from __future__ import annotations

from node.client.login import FailureDelays


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_failure_no_wait():
    delays = FailureDelays(0.1, 2.0, 100, Clock())
    assert delays.wait("192.0.2.1") == 0.0


def test_the_delay_doubles_per_failure_up_to_the_cap():
    clock = Clock()
    delays = FailureDelays(0.1, 0.5, 100, clock)
    waits = []
    for _ in range(5):
        delays.failed("192.0.2.1")
        waits.append(round(delays.wait("192.0.2.1"), 6))
    assert waits[0] == 0.1
    assert waits == sorted(waits)
    assert delays.delay(1) == 0.1 and delays.delay(2) == 0.2 and delays.delay(3) == 0.4
    assert delays.delay(4) == 0.5 and delays.delay(60) == 0.5 and delays.delay(10_000) == 0.5
    assert delays.wait("192.0.2.2") == 0.0  # another address is not held back


def test_concurrent_tries_are_spaced_not_bunched():
    clock = Clock()
    delays = FailureDelays(0.1, 2.0, 100, clock)
    delays.failed("192.0.2.1")
    assert [round(delays.wait("192.0.2.1"), 6) for _ in range(3)] == [0.1, 0.2, 0.3]


def test_a_quiet_address_is_forgotten():
    clock = Clock()
    delays = FailureDelays(0.1, 2.0, 100, clock)
    delays.failed("192.0.2.1")
    clock.now += 0.1 + 2.0 + 0.01
    assert delays.wait("192.0.2.1") == 0.0
    assert len(delays) == 0


def test_the_remembered_addresses_are_bounded():
    delays = FailureDelays(0.1, 2.0, 3, Clock())
    for i in range(10):
        delays.failed(f"192.0.2.{i}")
    assert len(delays) == 3
    assert delays.wait("192.0.2.9") > 0 and delays.wait("192.0.2.0") == 0.0


def test_ipv6_counts_per_64_and_mapped_ipv4_as_ipv4():
    delays = FailureDelays(0.1, 2.0, 100, Clock())
    delays.failed("2001:db8:1:2::1")
    assert delays.wait("2001:db8:1:2::ffff") > 0
    assert delays.wait("2001:db8:1:3::1") == 0.0
    delays.failed("::ffff:192.0.2.7")
    assert delays.wait("192.0.2.7") > 0
