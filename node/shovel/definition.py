"""A dynamic shovel's definition: the value of a `shovel` runtime parameter,
checked key by key as RabbitMQ's rabbit_shovel_parameters and its amqp10 and
local protocol modules check theirs, and turned into a `ShovelDefinition`.

Warren's shovel speaks AMQP 1.0 only: `src-protocol`/`dest-protocol` are
`amqp10` (any AMQP 1.0 broker, `src-address`/`dest-address`) or `local`
(this cluster's own queue, `src-queue`/`dest-queue`). RabbitMQ takes an
absent protocol for amqp091, so it must be given. The AMQP 0-9-1 keys
(`src-exchange`, `dest-exchange-key`, ...) and any other key are refused
naming the key: nothing in a definition is accepted and then ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "ACK_MODES",
    "DefinitionError",
    "Endpoint",
    "ShovelDefinition",
    "amqp10_to_local",
    "encode",
    "mask_uri",
    "parse",
]

ACK_MODES = ("on-confirm", "on-publish", "no-ack")
PROTOCOLS = ("amqp10", "local")
DEFAULT_PREFETCH = 1000  # RabbitMQ's
DEFAULT_RECONNECT_DELAY = 5.0  # seconds, RabbitMQ's
_KEYS = ("src-uri", "src-address", "src-queue", "src-protocol", "src-prefetch-count", "src-delete-after",
         "dest-uri", "dest-address", "dest-queue", "dest-protocol", "dest-add-forward-headers",
         "ack-mode", "reconnect-delay")  # fmt: skip
# RabbitMQ's keys for AMQP 0-9-1 shovels and its other options Warren does not run
_AMQP091_KEYS = ("src-exchange", "src-exchange-key", "src-queue-args", "src-consumer-args", "dest-exchange",
                 "dest-exchange-key", "dest-queue-args", "dest-publish-properties", "publish-properties",
                 "publish-fields", "add-forward-headers", "delete-after", "prefetch-count")  # fmt: skip


class DefinitionError(ValueError):
    """A definition Warren refuses; the message names the key."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One side of a shovel: where to connect and which node to use there."""

    protocol: str  # "amqp10" or "local"
    uris: tuple[str, ...]  # amqp10: tried in turn; local: ("amqp://...",) naming at most a user and vhost
    address: str  # the AMQP 1.0 address attached to (a local queue as /queues/NAME)
    queue: str = ""  # local: the queue's name

    def masked_uri(self) -> str:
        return mask_uri(self.uris[0])


@dataclass(frozen=True, slots=True)
class ShovelDefinition:
    source: Endpoint
    dest: Endpoint
    ack_mode: str = "on-confirm"
    prefetch: int = DEFAULT_PREFETCH
    delete_after: int | str = "never"  # a count, "never" or "queue-length"
    reconnect_delay: float = DEFAULT_RECONNECT_DELAY
    forward_headers: bool = False


def _uris(key: str, value: Any, protocol: str) -> tuple[str, ...]:
    uris = [value] if isinstance(value, str) else value
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        raise DefinitionError(f"{key} must be a URI or a non-empty list of URIs, got {value!r}")
    for uri in uris:
        _check_uri(key, uri, protocol)
    return tuple(uris)


def _check_uri(key: str, uri: str, protocol: str) -> None:
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as e:
        raise DefinitionError(f"{key}: '{mask_uri(uri)}' is not a URI ({e})") from None
    if parts.scheme not in ("amqp", "amqps"):
        raise DefinitionError(f"{key}: '{mask_uri(uri)}' is not an amqp:// or amqps:// URI")
    if parts.query or parts.fragment:
        raise DefinitionError(f"{key}: URI options ('?{parts.query}') are not supported")
    if protocol == "local":
        if parts.hostname or port is not None or parts.scheme != "amqp":
            raise DefinitionError(f"{key}: a local shovel's URI names no host (amqp:// or amqp:///VHOST)")
    elif not parts.hostname:
        raise DefinitionError(f"{key}: '{mask_uri(uri)}' names no host")


def mask_uri(uri: str) -> str:
    """The URI without its password (RabbitMQ shows shovel URIs so)."""
    try:
        parts = urlsplit(uri)
        if parts.password is None:
            return uri
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        return parts._replace(netloc=f"{user}@{netloc}" if user else netloc).geturl()
    except ValueError:
        return "(invalid URI)"


def _protocol(value: dict, key: str) -> str:
    if key not in value:
        raise DefinitionError(f"{key} is missing: RabbitMQ takes that for amqp091, and Warren's shovels speak "
                              f"AMQP 1.0 ({' or '.join(PROTOCOLS)})")  # fmt: skip
    protocol = value[key]
    if protocol not in PROTOCOLS:
        raise DefinitionError(f"{key} must be {' or '.join(PROTOCOLS)}, got {protocol!r}")
    return protocol


def _string(value: dict, key: str) -> str:
    s = value[key]
    if not isinstance(s, str) or not s:
        raise DefinitionError(f"{key} must be a non-empty string, got {s!r}")
    return s


def _endpoint(value: dict, side: str) -> Endpoint:
    protocol = _protocol(value, f"{side}-protocol")
    uri_key, address_key, queue_key = f"{side}-uri", f"{side}-address", f"{side}-queue"
    if uri_key not in value:
        raise DefinitionError(f"{uri_key} is missing")
    uris = _uris(uri_key, value[uri_key], protocol)
    if protocol == "amqp10":
        if queue_key in value:
            raise DefinitionError(f"{queue_key} is for {side}-protocol local; amqp10 takes {address_key}")
        if address_key not in value:
            raise DefinitionError(f"{address_key} is missing ({side}-protocol amqp10)")
        return Endpoint(protocol, uris, _string(value, address_key))
    if address_key in value:
        raise DefinitionError(f"{address_key} is for {side}-protocol amqp10; local takes {queue_key}")
    if queue_key not in value:
        raise DefinitionError(f"{queue_key} is missing ({side}-protocol local)")
    queue = _string(value, queue_key)
    return Endpoint(protocol, uris, "/queues/" + quote(queue, safe=""), queue)


def local_vhost(uri: str, default: str) -> str:
    """The vhost a local URI names (amqp:///VHOST), else `default`."""
    path = urlsplit(uri).path
    return unquote(path[1:]) if len(path) > 1 else default


def parse(value: Any) -> ShovelDefinition:
    """The definition `value` (a JSON object) describes; DefinitionError naming the first bad key."""
    if not isinstance(value, dict):
        raise DefinitionError("a shovel's value is an object of src-* and dest-* keys")
    for key in value:
        if key in _AMQP091_KEYS:
            raise DefinitionError(f"{key} is an AMQP 0-9-1 shovel key; Warren's shovels speak AMQP 1.0 only")
        if key not in _KEYS:
            raise DefinitionError(f"unknown shovel key {key!r} (Warren has {', '.join(_KEYS)})")
    source, dest = _endpoint(value, "src"), _endpoint(value, "dest")
    ack_mode = value.get("ack-mode", "on-confirm")
    if ack_mode not in ACK_MODES:
        raise DefinitionError(f"ack-mode must be one of {', '.join(ACK_MODES)}, got {ack_mode!r}")
    prefetch = value.get("src-prefetch-count", DEFAULT_PREFETCH)
    if type(prefetch) is not int or not 1 <= prefetch <= 2**31 - 1:
        raise DefinitionError(f"src-prefetch-count must be an integer from 1, got {prefetch!r}")
    delete_after = value.get("src-delete-after", "never")
    if delete_after == "queue-length":
        if source.protocol != "local":
            raise DefinitionError("src-delete-after queue-length needs src-protocol local (RabbitMQ's amqp10 "
                                  "shovel takes never or a number)")  # fmt: skip
    elif delete_after != "never" and (type(delete_after) is not int or delete_after < 0):
        raise DefinitionError(f"src-delete-after must be never, queue-length or a number from 0, got {delete_after!r}")
    if type(delete_after) is int and ack_mode == "no-ack":
        raise DefinitionError("src-delete-after: a number cannot go with ack-mode no-ack (as RabbitMQ)")
    delay = value.get("reconnect-delay", DEFAULT_RECONNECT_DELAY)
    if type(delay) not in (int, float) or not 0 <= delay <= 86400:
        raise DefinitionError(f"reconnect-delay must be a number of seconds from 0, got {delay!r}")
    forward = value.get("dest-add-forward-headers", False)
    if type(forward) is not bool:
        raise DefinitionError(f"dest-add-forward-headers must be true or false, got {forward!r}")
    return ShovelDefinition(source, dest, ack_mode, prefetch, delete_after, float(delay), forward)


def encode(value: dict) -> str:
    """The JSON text a valid value is stored as (keys sorted: the same value, the same text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def amqp10_to_local(src_uri: str, src_address: str, dest_queue: str, *, ack_mode: str = "on-confirm",
                    prefetch: int = DEFAULT_PREFETCH, delete_after: int | str = "never",
                    reconnect_delay: float = DEFAULT_RECONNECT_DELAY, forward_headers: bool = False) -> dict:  # fmt: skip
    """The value of a shovel moving another broker's queue (`src_address`, as
    that broker spells it: `/amq/queue/NAME` on RabbitMQ 3.x) into this
    cluster's `dest_queue`: what a migration PUTs to
    /api/parameters/shovel/VHOST/NAME; its progress is in GET /api/shovels.
    Checked here, so a bad argument raises DefinitionError before any request."""
    value = {"src-protocol": "amqp10", "src-uri": src_uri, "src-address": src_address,
             "dest-protocol": "local", "dest-uri": "amqp://", "dest-queue": dest_queue, "ack-mode": ack_mode,
             "src-prefetch-count": prefetch, "src-delete-after": delete_after, "reconnect-delay": reconnect_delay,
             "dest-add-forward-headers": forward_headers}  # fmt: skip
    parse(value)
    return value
