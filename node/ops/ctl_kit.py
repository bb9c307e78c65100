"""What every `warren ctl` command module is built from: the HTTP client a
command calls the node with, its errors and sysexits codes, what a command
returns (Listing, Done, Report) and the table it prints, and the
CommandTable each module keeps its commands in.

node/ops/ctl.py lists the command modules' tables (its `COMMANDS`); the
command modules import this and not ctl.py, so no import goes in a circle
(tests/test_layout.py checks it).
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

EX_USAGE, EX_DATAERR, EX_UNAVAILABLE, EX_SOFTWARE, EX_NOPERM = 64, 65, 69, 70, 77


class CtlError(Exception):
    def __init__(self, message: str, code: int, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status  # the HTTP status, when the node answered


def _q(name: str) -> str:
    return quote(name, safe="")


class Client:
    """A few lines of urllib: JSON in, JSON out, errors as CtlError."""

    def __init__(self, host: str, port: int, user: str, password: str, timeout: float = 30.0, cacert: str = ""):
        # with a CA file, HTTPS (the node's https_port) checked against it
        self.base = f"{'https' if cacert else 'http'}://{host}:{port}"
        self.tls = ssl.create_default_context(cafile=cacert) if cacert else None
        self.auth = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", self.auth)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.tls) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise self._error(e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise CtlError(f"unable to connect to the node at {self.base}: {reason}", EX_UNAVAILABLE) from None
        return json.loads(raw) if raw.strip() else None

    def _error(self, e: urllib.error.HTTPError) -> CtlError:
        try:
            reason = json.loads(e.read()).get("reason") or e.reason
        except (ValueError, AttributeError):
            reason = e.reason
        code = {400: EX_DATAERR, 401: EX_NOPERM, 403: EX_NOPERM, 404: EX_DATAERR, 409: EX_DATAERR,
                503: EX_UNAVAILABLE}.get(e.code, EX_SOFTWARE)  # fmt: skip
        return CtlError(f"{reason} (HTTP {e.code})", code, e.code)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str, headers: dict | None = None) -> Any:
        return self.request("DELETE", path, headers=headers)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)


# ---------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "[" + ", ".join(value) + "]"  # tags, as rabbitmqctl shows them
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def table(rows: list[dict], columns: list[str]) -> str:
    """Aligned columns under a header; the last column is not padded."""
    cells = [columns] + [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = []
    for r in cells:
        padded = [v.ljust(w) for v, w in zip(r[:-1], widths[:-1], strict=True)] + [r[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


# rabbitmqctl's column names for bindings, and what they are in the HTTP API
_BINDING_COLUMNS = {"source_name": "source", "destination_name": "destination", "destination_kind": "destination_type"}


def _binding_row(b: dict) -> dict:
    row = dict(b)
    row["source_kind"] = "exchange"
    for ctl_name, api_name in _BINDING_COLUMNS.items():
        row[ctl_name] = b.get(api_name)
    return row


# ---------------------------------------------------------------- commands

Command = Callable[[Client, argparse.Namespace], Any]


class CommandTable(dict[str, tuple[Command, str]]):
    """One command module's commands: name -> (function, help), in the order defined."""

    def command(self, name: str, help: str) -> Callable[[Command], Command]:
        """Decorator: the function is command `name` of this table."""

        def add(fn: Command) -> Command:
            if name in self:
                raise ValueError(f"ctl command {name!r} is defined twice")
            self[name] = (fn, help)
            return fn

        return add


class Listing:
    """What a list_* command returns: rows, the columns to show, and the
    columns that exist (a column in no row and not known is an error, even
    when there are no rows, as in rabbitmqctl)."""

    def __init__(self, rows: list[dict], columns: list[str], title: str, known: str):
        self.rows, self.columns, self.title, self.known = rows, columns, title, known.split()

    def unknown_columns(self) -> list[str]:
        return [c for c in self.columns if c not in self.known and all(c not in row for row in self.rows)]


# The fields of the HTTP API's objects (node/http/formats.py), per listing.
CONNECTION_COLUMNS = ("name node type user vhost protocol host port peer_host peer_port channels state ssl peer_cert_subject "
                      "frame_max channel_max timeout client_properties connected_at recv_oct recv_cnt send_oct send_cnt")  # fmt: skip
QUEUE_COLUMNS = (
    "name vhost type durable auto_delete exclusive arguments node state messages messages_ready "
    "messages_unacknowledged messages_details messages_ready_details messages_unacknowledged_details "
    "message_bytes_ready consumers policy operator_policy effective_policy_definition "
    "exclusive_consumer_tag message_stats memory leader members consumer_utilisation consumer_capacity"
)
EXCHANGE_COLUMNS = "name vhost type durable auto_delete internal arguments"
BINDING_COLUMNS = ("source_name source_kind destination_name destination_kind routing_key arguments source vhost "
                   "destination destination_type properties_key")  # fmt: skip
VHOST_COLUMNS = ("name description tags default_queue_type protected_from_deletion metadata tracing cluster_state "
                 "messages messages_ready messages_unacknowledged messages_details messages_ready_details "
                 "messages_unacknowledged_details")  # fmt: skip
USER_COLUMNS = "name tags password_hash hashing_algorithm limits"
PERMISSION_COLUMNS = "user vhost configure write read"


class Done:
    """What a command that changes something returns."""

    def __init__(self, message: str):
        self.message = message


class Report:
    """What a command that shows one object returns: its JSON, and how people read it."""

    def __init__(self, data: Any, text: str):
        self.data, self.text = data, text
