"""Malformed input to the AMQP 1.0 codec [1.6]: a DecodeError and nothing else.

Invalid constructors, truncation at every cut point, a table of malformed
encodings (odd map counts, bad UTF-8, sizes and counts that disagree, bad
descriptors, trailing bytes), nesting deep enough to exhaust recursion, inputs
built to amplify time or memory, and random and mutated bytes.
"""

from __future__ import annotations

import time
import uuid

import pytest
from codec_strategies import COMPOSITES, MEDIUM, SECTIONS, SETTINGS, _assert_every_cut_fails, u8, u32, values
from hypothesis import given
from hypothesis import strategies as st

from amqp import codec
from amqp import definitions as d
from amqp.errors import DecodeError
from amqp.types import Array, Described, ULong

# ------------------------------------------------------------------ malformed input

VALID_CONSTRUCTORS = {
    0x00, 0x40, 0x41, 0x42, 0x43, 0x44, 0x45, 0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x60, 0x61,
    0x70, 0x71, 0x72, 0x73, 0x74, 0x80, 0x81, 0x82, 0x83, 0x84, 0x94, 0x98, 0xA0, 0xA1, 0xA3,
    0xB0, 0xB1, 0xB3, 0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0,
}  # fmt: skip


@pytest.mark.parametrize("code", sorted(set(range(256)) - VALID_CONSTRUCTORS), ids=lambda c: f"{c:02x}")
def test_invalid_constructor(code):
    for tail in (b"", b"\x00" * 20, b"\x01\x40"):
        with pytest.raises(DecodeError):
            codec.loads(bytes([code]) + tail)
    # also as a list element, an array element constructor and a descriptor
    with pytest.raises(DecodeError):
        codec.loads(b"\xc0\x03\x01" + bytes([code, 0]))
    with pytest.raises(DecodeError):
        codec.loads(b"\xe0\x03\x01" + bytes([code, 0]))
    with pytest.raises(DecodeError):
        codec.loads(b"\x00" + bytes([code, 0, 0x40]))


@MEDIUM
@given(st.one_of(values, *COMPOSITES.values(), *SECTIONS.values()))
def test_truncated_at_every_cut_point(v):
    data = codec.dumps(v)
    if len(data) <= 400:
        _assert_every_cut_fails(data)
    else:  # decoding each prefix is linear: sample the cut points of long values
        step = len(data) // 200 + 1
        _assert_every_cut_fails(data, [*range(0, len(data), step), *range(len(data) - 20, len(data))])


MALFORMED = {
    "map8 odd count": "c10403404040",
    "map8 count one": "c1020140",
    "map32 odd count": "d10000000500000001" + "40",
    "map duplicate key": "c10504" + "4140" + "4140",
    "map duplicate symbol key": "c10904" + "a3016140" + "a3016140",
    "map key a list": "c103024540",
    "map key a map": "c10502" + "c10100" + "40",
    "map key an array": "c10602" + "e0020040" + "40",
    "map key a composite": "c10602" + "00532445" + "40",
    "invalid utf-8": "a102c328",
    "utf-8 surrogate": "a103eda080",
    "utf-8 overlong": "a102c080",
    "utf-8 cut sequence": "a101e2",
    "invalid utf-8 str32": "b100000002c328",
    "symbol not ascii": "a30180",
    "symbol not ascii sym32": "b300000001ff",
    "boolean byte 2": "5602",
    "boolean byte ff": "56ff",
    "char past unicode": "7300110000",
    "char surrogate": "730000d800",
    "list count larger than body": "c00305" + "4040",
    "list count smaller than body": "c00301" + "4040",
    "list32 count mismatch": "d00000000600000001" + "4040",
    "list8 size zero": "c000",
    "list32 size below 4": "d00000000300000000",
    "list size past end": "c00a0140",
    "map32 size past end": "d1ffffffff00000000",
    "list32 huge count": "d000000005ffffffff40",
    "element runs past its list": "c00201" + "a00178",
    "array8 size zero": "e000",
    "array without constructor": "e00100",
    "array count too big": "e00305" + "5201",
    "array body longer than count": "e00401" + "520102",
    "array descriptor without constructor": "e00401" + "005301",
    "array of null with a body": "e00301" + "4040",
    "array of null, huge count": "f000000005ffffffff40",
    "array of null, count beyond its size": "e0020340",
    "array32 of null, count beyond its size": "f0000000050100000040",
    "array element past its end": "e00401" + "a10278",
    "array descriptor a list": "e00501" + "0045" + "a100",
    "array descriptor a long": "e00601" + "005501" + "a100",
    "array descriptor a map": "e00701" + "00c10100" + "a100",
    "descriptor a long": "00550145",
    "descriptor a string": "00a1016145",
    "descriptor a list": "004545",
    "descriptor a map": "00c1010045",
    "descriptor a uint": "00520145",
    "descriptor a boolean": "004145",
    "descriptor a described value": "0000530153" + "0145",
    "descriptor a long naming open": "005510" + "c00401a10163",
    "descriptor a string naming open": "00a10e" + b"amqp:open:list".hex() + "c00401a10163",
    "descriptor a uint naming accepted": "00522445",
    "described without value": "005310",
    "described without descriptor": "00",
    "trailing bytes": "4040",
    "trailing bytes after list": "450000",
    "empty": "",
    "truncated uuid": "98" + "00" * 15,
    "truncated decimal128": "94" + "00" * 15,
    "binary32 length past end": "b0ffffffff00",
    "string32 length past end": "b17fffffff",
}


@pytest.mark.parametrize("hexed", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_input_is_a_decode_error(hexed):
    data = bytes.fromhex(hexed)
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(data)
    assert time.monotonic() - t0 < 0.5  # no amplification
    with pytest.raises(DecodeError):  # nor inside a list
        codec.loads(b"\xd0" + u32(len(data) + 4) + u32(1) + data)


def _nested(depth: int, head, innermost: bytes = b"\x45") -> bytes:
    """`depth` layers of head(size of what they wrap) around `innermost`, built
    back to front without quadratic copying."""
    size, parts = len(innermost), []
    for _ in range(depth):
        h = head(size)
        parts.append(h)
        size += len(h)
    return b"".join(reversed(parts)) + innermost


def _nested_lists(depth: int) -> bytes:
    return _nested(depth, lambda s: b"\xd0" + u32(s + 4) + u32(1))


def _nested_arrays(depth: int) -> bytes:
    # an array of one array of one array ... of an empty array of null; the
    # elements of an array carry no constructor of their own
    inner = u32(5) + u32(0) + b"\x40"
    return b"\xf0" + _nested(depth - 1, lambda s: u32(s + 5) + u32(1) + b"\xf0", inner)


NESTINGS = {
    "list32": _nested_lists,
    "list8": lambda n: _nested(min(n, 80), lambda s: b"\xc0" + u8(s + 1) + b"\x01"),
    "map32": lambda n: _nested(n, lambda s: b"\xd1" + u32(s + 5) + u32(2) + b"\x40"),
    "array32": _nested_arrays,
    # array of one list holding an array of one list ...
    "arrays of lists": lambda n: _nested(
        n // 2, lambda s: b"\xf0" + u32(13 + s) + u32(1) + b"\xd0" + u32(4 + s) + u32(1)
    ),
    "described descriptors": lambda n: b"\x00" * n + b"\x53\x01" + b"\x45" * n,
    "described values": lambda n: b"\x00\x53\x01" * n + b"\x45",
    "unknown composite values": lambda n: b"\x00\x80\x00\x00\x00\x01\x00\x00\x00\x01" * n + b"\x45",
    "close(error=close(...))": lambda n: _nested(n, lambda s: b"\x00\x53\x18\xd0" + u32(s + 4) + u32(1)),
}


@pytest.mark.parametrize("kind", list(NESTINGS))
def test_deep_nesting_is_a_decode_error_not_recursion(kind):
    data = NESTINGS[kind](10_000)
    with pytest.raises(DecodeError):
        codec.loads(data)


def test_moderate_nesting_decodes():
    v: list = []
    for _ in range(30):
        v = [v]
    assert codec.loads(_nested_lists(30)) == v
    assert codec.loads(codec.dumps(v)) == v
    a = codec.loads(_nested_arrays(20))
    for _ in range(19):
        assert isinstance(a, Array) and len(a) == 1
        a = a[0]
    assert a == []
    close = codec.loads(NESTINGS["close(error=close(...))"](20))
    assert isinstance(close.error, d.Close)


def test_descriptor_arrays_must_be_hashable():
    # regression: an array whose descriptor is a list used to raise TypeError
    with pytest.raises(DecodeError):
        codec.loads(bytes.fromhex("e00601004552" + "01"))


def test_array_of_nulls_is_bounded_by_its_size():
    # regression: 10 bytes used to ask for 2**32 Python Nones
    assert codec.loads(bytes.fromhex("e0020140")) == [None]
    assert codec.loads(bytes.fromhex("e0020240")) == [None, None]
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(bytes.fromhex("f000000005ffffffff40"))
    assert time.monotonic() - t0 < 0.1


@pytest.mark.parametrize("kind", ["uuid", "described"])
def test_map_keys_sharing_one_hash_are_refused_quickly(kind):
    # regression: UUID (and described) keys hash without a key, so 8,000 of
    # them with one hash took seconds to insert, quadratically
    p = (1 << 61) - 1
    keys = [uuid.UUID(int=5 + i * p) for i in range(20_000)]
    if kind == "described":
        keys = [Described(ULong(1), k) for k in keys]
    assert len({hash(k) for k in keys[:100]}) == 1
    # encoded by hand: building the dict would be the quadratic thing itself
    body = b"".join(codec.dumps(k) + b"\x40" for k in keys)
    data = b"\xd1" + u32(len(body) + 4) + u32(2 * len(keys)) + body
    t0 = time.monotonic()
    with pytest.raises(DecodeError):
        codec.loads(data)
    assert time.monotonic() - t0 < 1
    # a few such keys are fine, and so are large maps of ordinary keys
    assert len(codec.loads(codec.dumps(dict.fromkeys(keys[:20])))) == 20
    assert codec.loads(codec.dumps({-1: 1, -2: 2})) == {-1: 1, -2: 2}  # hash(-1) == hash(-2)
    big = {uuid.UUID(int=i * 7919): i for i in range(5000)}
    assert codec.loads(codec.dumps(big)) == big


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_decode_error(data):
    try:
        codec.loads(data)
    except DecodeError:
        pass


_mutable = st.one_of(values, *COMPOSITES.values(), *SECTIONS.values())


@SETTINGS
@given(_mutable, st.data())
def test_mutated_valid_encodings_raise_only_decode_error(v, data):
    raw = bytearray(codec.dumps(v))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "set", "insert", "delete"]))
        i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        if op == "insert" or not raw:
            raw.insert(i, data.draw(st.integers(0, 255)))
        elif op == "delete":
            del raw[i]
        elif op == "flip":
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        else:
            raw[i] = data.draw(st.sampled_from([0x00, 0x40, 0x45, 0x53, 0xA1, 0xC0, 0xD0, 0xE0, 0xF0, 0xFF]))
    try:
        codec.loads(bytes(raw))
    except DecodeError:
        pass
