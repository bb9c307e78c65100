"""Bounds on what an administrator or a client may put in the metadata,
checked where requests come in (the HTTP API, the /management node, the
definitions file), before a command is proposed. The machine itself does not
apply them: commands already in a log stay valid whatever the bounds become.

- Names of vhosts, users, queues, exchanges, policies and runtime parameters: at most 255 bytes
  of UTF-8 (AMQP 0-9-1's shortstr, which RabbitMQ applies to every name), no
  NUL and no other control character.
- Stored password hashes: Warren's PBKDF2-SHA256 format only, with an
  iteration count a login can afford (a hash of 10^7 iterations cost 2.5 s
  per login) and a well-formed salt and digest.
- Queue arguments within the ranges RabbitMQ enforces: x-message-ttl and
  x-expires are unsigned 32-bit milliseconds, lengths are AMQP longs; any
  integer in an argument table must fit an AMQP long.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metadata import commands as mc
from routing import rabbit_passwords

MAX_NAME_BYTES = 255
MAX_EXPIRY_MS = 2**32 - 1  # x-message-ttl, x-expires (RabbitMQ's max expiry timer)
MAX_LONG = 2**63 - 1
MIN_LONG = -(2**63)
MIN_HASH_ITERATIONS = 10_000
MAX_HASH_ITERATIONS = 1_000_000
MAX_SALT_BYTES = 64
DIGEST_BYTES = 32  # SHA-256
MAX_ARGUMENT_DEPTH = 8  # nested lists and maps in one argument value
MAX_PARAMETER_BYTES = 65536  # a runtime parameter's JSON (a shovel's: a few hundred bytes)

# argument -> (smallest, largest) for the integer arguments of queues
QUEUE_INTEGER_ARGUMENTS = {
    "x-message-ttl": (0, MAX_EXPIRY_MS),
    "x-expires": (1, MAX_EXPIRY_MS),
    "x-max-length": (0, MAX_LONG),
    "x-max-length-bytes": (0, MAX_LONG),
    "x-delivery-limit": (MIN_LONG, MAX_LONG),
    "x-quorum-initial-group-size": (1, 255),
    "x-quorum-target-group-size": (1, 255),
    "x-max-priority": (0, 255),
}


class Invalid(ValueError):
    """An input out of bounds; the message says which and why."""


def check_name(what: str, name: Any) -> None:
    if not isinstance(name, str):
        raise Invalid(f"{what} name must be a string")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise Invalid(f"{what} name is {size} bytes of UTF-8; at most {MAX_NAME_BYTES} are allowed")
    for i, ch in enumerate(name):
        if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            raise Invalid(f"{what} name has the control character U+{ord(ch):04X} at position {i}")
        if 0xD800 <= ord(ch) < 0xE000:
            raise Invalid(f"{what} name is not valid UTF-8 (a lone surrogate at position {i})")


def check_password_hash(stored: Any) -> None:
    """'' (no password), pbkdf2-sha256$iterations$salt-hex$digest-hex, or a hash
    imported from RabbitMQ (routing/rabbit_passwords.py)."""
    if stored == "":
        return
    if not isinstance(stored, str):
        raise Invalid("password_hash must be a string")
    if rabbit_passwords.is_rabbit_hash(stored):  # imported from RabbitMQ: checked as it is, kept as it is
        algorithm, exported = rabbit_passwords.export(stored)
        try:
            rabbit_passwords.stored_form(algorithm, exported)
        except ValueError as e:
            raise Invalid(str(e)) from None
        return
    parts = stored.split("$")
    if len(parts) != 4 or parts[0] != "pbkdf2-sha256":
        raise Invalid("password_hash must be pbkdf2-sha256$<iterations>$<salt hex>$<digest hex>")
    _, iterations, salt, digest = parts
    if not iterations.isascii() or not iterations.isdigit():
        raise Invalid(f"password_hash iterations must be a decimal number, got {iterations[:20]!r}")
    count = int(iterations)
    if not MIN_HASH_ITERATIONS <= count <= MAX_HASH_ITERATIONS:
        raise Invalid(f"password_hash iterations must be between {MIN_HASH_ITERATIONS} and "
                      f"{MAX_HASH_ITERATIONS}, got {count}")  # fmt: skip
    try:
        salt_bytes, digest_bytes = bytes.fromhex(salt), bytes.fromhex(digest)
    except ValueError:
        raise Invalid("password_hash salt and digest must be hexadecimal") from None
    if not 1 <= len(salt_bytes) <= MAX_SALT_BYTES:
        raise Invalid(f"password_hash salt must be 1 to {MAX_SALT_BYTES} bytes, got {len(salt_bytes)}")
    if len(digest_bytes) != DIGEST_BYTES:
        raise Invalid(f"password_hash digest must be {DIGEST_BYTES} bytes (SHA-256), got {len(digest_bytes)}")


def check_arguments(what: str, arguments: Mapping[str, Any] | None, queue: bool = False) -> None:
    """Integers in range (the queue ones RabbitMQ bounds, all of them within
    an AMQP long) and values no deeper than MAX_ARGUMENT_DEPTH."""
    for key, value in (arguments or {}).items():
        if queue and key in QUEUE_INTEGER_ARGUMENTS and _is_int(value):
            low, high = QUEUE_INTEGER_ARGUMENTS[key]
            if not low <= value <= high:
                raise Invalid(f"{what} argument {key} must be between {low} and {high}, got {_short(value)}")
        _check_value(what, key, value, 0)


def _check_value(what: str, key: Any, value: Any, depth: int) -> None:
    if depth > MAX_ARGUMENT_DEPTH:
        raise Invalid(f"{what} argument {key} is nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    if _is_int(value):
        if not MIN_LONG <= value <= MAX_LONG:
            raise Invalid(f"{what} argument {key} is out of range for an AMQP long: {_short(value)}")
    elif isinstance(value, Mapping):
        for v in value.values():
            _check_value(what, key, v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_value(what, key, v, depth + 1)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 30 else f"{text[:12]}...({len(text)} digits)"


def check_command(command: Any) -> None:
    """Raises Invalid when a command from a request names or holds something
    out of bounds (only the fields a request can set are looked at)."""
    kind = type(command)
    if kind is mc.AddVHost or kind is mc.AddVHostWithQueueType:
        check_name("vhost", command.name)
    elif kind is mc.PutUser:
        check_name("user", command.name)
        check_password_hash(command.password_hash)
    elif kind is mc.DeclareQueue or kind is mc.DeclareQueueByUser:
        check_name("queue", command.name)
    elif kind is mc.DeclareExchange:
        check_name("exchange", command.name)
    elif issubclass(kind, mc.SetPolicy):  # operator policies too
        check_name("policy", command.name)
    elif kind is mc.SetParameter:
        check_name("parameter", command.name)
        if len(command.value) > MAX_PARAMETER_BYTES:
            raise Invalid(f"a parameter value is at most {MAX_PARAMETER_BYTES} bytes of JSON, got {len(command.value)}")
