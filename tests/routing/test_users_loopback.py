"""Which peers count as loopback for loopback-only users (guest)."""

import pytest

from routing.users import Authenticator, is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "::ffff:127.0.0.2",
                                  "localhost"])  # fmt: skip
def test_loopback_addresses(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.1", "::ffff:10.0.0.1", "192.168.1.1", "2001:db8::1", "example.com"])
def test_other_addresses_are_not_loopback(host):
    assert not is_loopback(host)


def test_guest_logs_in_over_ipv4_mapped_loopback():
    auth = Authenticator(anonymous_user=None, loopback_users=["guest"])
    auth.add_user("guest", "guest")
    assert auth.authenticate("PLAIN", b"\0guest\0guest", "::ffff:127.0.0.1") == "guest"
    assert auth.authenticate("PLAIN", b"\0guest\0guest", "::ffff:192.0.2.7") is None
