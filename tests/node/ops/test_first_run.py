"""node/ops/first_run.py: the console URL and the login a starting node prints."""

from __future__ import annotations

from node.ops.first_run import console_lines


def test_every_interface_is_shown_as_localhost_and_the_stock_login_in_full():
    assert console_lines("0.0.0.0", 15672, None, "guest", "guest", True) == [
        "web console: http://localhost:15672/",
        "log in as guest / guest (from this machine only: a loopback user)",
    ]
    assert console_lines("::", 15672, None, None, "guest", True) == ["web console: http://localhost:15672/"]


def test_both_ports_an_ipv6_host_and_a_configured_password_that_is_never_printed():
    lines = console_lines("::1", 15672, 15671, "admin", "s3cret", False)
    assert lines == ["web console: http://[::1]:15672/  https://[::1]:15671/",
                     "log in as admin / the setting default_password"]  # fmt: skip
    assert not any("s3cret" in line for line in lines)


def test_no_http_port_says_the_console_is_off():
    assert console_lines("10.0.0.5", None, None, "guest", "guest", True) == ["web console: off (no HTTP or HTTPS port)"]
