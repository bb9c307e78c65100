"""What a starting node tells a newcomer after its "listening on" line (node/main.py):
where the web console is, and how to log in while the default user still has its
default password. Pure: node/main.py finds out the facts."""

from __future__ import annotations

import ipaddress

from node.config import Config

STOCK_PASSWORD = Config.default_password  # "guest", as every RabbitMQ tutorial has it
ANY_ADDRESS = ("", "0.0.0.0", "::")  # listening on every interface: this machine answers as localhost


def url_host(listen_host: str) -> str:
    """The host to put in a URL for a node listening on `listen_host`."""
    if listen_host in ANY_ADDRESS:
        return "localhost"
    try:
        if ipaddress.ip_address(listen_host).version == 6:
            return f"[{listen_host}]"
    except ValueError:
        pass  # a host name
    return listen_host


def console_lines(listen_host: str, http_port: int | None, https_port: int | None, default_user: str | None,
                  default_password: str, loopback_only: bool) -> list[str]:  # fmt: skip
    """The lines printed after the listening line. `default_user` is the default user's
    name while it exists with `default_password`, else None (then no login is suggested).
    Only the stock password is printed: one set in the configuration is a secret, and
    stdout ends up in logs."""
    host = url_host(listen_host)
    urls = [f"{scheme}://{host}:{port}/" for scheme, port in (("http", http_port), ("https", https_port))
            if port is not None]  # fmt: skip
    if not urls:
        return ["web console: off (no HTTP or HTTPS port)"]
    lines = ["web console: " + "  ".join(urls)]
    if default_user is not None:
        where = " (from this machine only: a loopback user)" if loopback_only else ""
        password = default_password if default_password == STOCK_PASSWORD else "the setting default_password"
        lines.append(f"log in as {default_user} / {password}{where}")
    return lines
