"""The on-disk chunk: the messages of one flush, as one unit of writing,
checking and reading.

    header  (HEADER, 36 bytes, big-endian)
        magic "WSC1", flags, bloom length, reserved,
        first offset (u64), record count (u32), first timestamp (ms, i64),
        data length (u32), CRC32 of header-before-crc + bloom + data
    bloom   the filter values of the chunk's records (BloomFilter); empty
            when no record has one
    data    `count` records, each: u32 length, then
            u8 exchange length + exchange, u16 routing key length + key,
            u16 filter value length (0xFFFF: none) + value, then the message
            exactly as the publisher sent it

A reader decides from the header and bloom alone whether the chunk can hold
anything its filter wants, and reads the data only then. The chunk is the
unit a replica will fetch by offset too (not built yet): the bytes are
self-describing and checked by their CRC.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from hashlib import blake2b

__all__ = ["HEADER", "BloomFilter", "ChunkHeader", "Record", "decode_records", "encode_chunk"]

MAGIC = b"WSC1"
HEADER = struct.Struct(">4sBBHQIqII")
FLAG_UNFILTERED = 0x01  # some record carries no filter value (for match-unfiltered)
NO_FILTER = 0xFFFF
_RECORD = struct.Struct(">I")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")


@dataclass(slots=True, frozen=True)
class Record:
    offset: int
    exchange: str
    routing_key: str
    filter_value: str | None
    payload: bytes


@dataclass(slots=True, frozen=True)
class ChunkHeader:
    flags: int
    bloom_len: int
    first_offset: int
    count: int
    timestamp: int
    data_len: int
    crc: int

    @property
    def size(self) -> int:
        """The whole chunk's bytes on disk."""
        return HEADER.size + self.bloom_len + self.data_len

    @property
    def has_unfiltered(self) -> bool:
        return bool(self.flags & FLAG_UNFILTERED)

    @classmethod
    def parse(cls, raw: bytes) -> ChunkHeader | None:
        """None when `raw` is not a chunk header (a torn or foreign tail)."""
        if len(raw) < HEADER.size:
            return None
        magic, flags, bloom_len, _, first, count, ts, data_len, crc = HEADER.unpack_from(raw)
        if magic != MAGIC:
            return None
        return cls(flags, bloom_len, first, count, ts, data_len, crc)

    def check(self, raw_header: bytes, bloom: bytes, data: bytes) -> bool:
        crc = zlib.crc32(raw_header[: HEADER.size - 4])
        crc = zlib.crc32(bloom, crc)
        return zlib.crc32(data, crc) == self.crc


class BloomFilter:
    """A fixed-size Bloom filter over filter values, two bits per value taken
    from one blake2b digest (stable across processes, unlike hash())."""

    __slots__ = ("bits",)

    def __init__(self, size: int, bits: bytes | None = None) -> None:
        self.bits = bytearray(bits) if bits is not None else bytearray(size)

    @staticmethod
    def _positions(value: str, nbits: int) -> tuple[int, int]:
        digest = blake2b(value.encode(), digest_size=8).digest()
        return int.from_bytes(digest[:4], "big") % nbits, int.from_bytes(digest[4:], "big") % nbits

    def add(self, value: str) -> None:
        for bit in self._positions(value, len(self.bits) * 8):
            self.bits[bit >> 3] |= 1 << (bit & 7)

    def may_contain(self, value: str) -> bool:
        if not self.bits:
            return False
        return all(self.bits[bit >> 3] & (1 << (bit & 7)) for bit in self._positions(value, len(self.bits) * 8))


def record_prefix(exchange: str, routing_key: str, filter_value: str | None) -> bytes:
    """What a record holds before its payload: exchange, routing key, filter value."""
    ex, rk = exchange.encode()[:255], routing_key.encode()[:0xFFFE]
    fv = b"" if filter_value is None else filter_value.encode()[:0xFFFE]
    return b"".join((_U8.pack(len(ex)), ex, _U16.pack(len(rk)), rk,
                     _U16.pack(NO_FILTER if filter_value is None else len(fv)), fv))  # fmt: skip


def record_head(size: int, prefix: bytes) -> bytes:
    """What comes before a record's payload: its length (`size`, prefix and payload) and prefix."""
    return _RECORD.pack(size) + prefix


def encode_record(exchange: str, routing_key: str, filter_value: str | None, payload: bytes) -> bytes:
    """One record."""
    prefix = record_prefix(exchange, routing_key, filter_value)
    return b"".join((record_head(len(prefix) + len(payload), prefix), payload))


def encode_chunk(first_offset: int, timestamp: int, records: list[bytes], filter_values: list[str | None],
                 bloom_bytes: int) -> bytes:  # fmt: skip
    """One chunk of already encoded records; `filter_values` are theirs, in order, one per record.
    `records` may also hold each record in parts (its head, then its payload): they are joined."""
    flags = 0
    bloom = b""
    if any(v is not None for v in filter_values):
        bf = BloomFilter(bloom_bytes)
        for value in filter_values:
            if value is not None:
                bf.add(value)
        bloom = bytes(bf.bits)
    if any(v is None for v in filter_values):
        flags |= FLAG_UNFILTERED
    data = b"".join(records)
    head = HEADER.pack(MAGIC, flags, len(bloom), 0, first_offset, len(filter_values), timestamp, len(data), 0)
    crc = zlib.crc32(data, zlib.crc32(bloom, zlib.crc32(head[: HEADER.size - 4])))
    return head[: HEADER.size - 4] + crc.to_bytes(4, "big") + bloom + data


def decode_records(header: ChunkHeader, data: bytes) -> list[Record]:
    records = []
    pos, offset = 0, header.first_offset
    for _ in range(header.count):
        (length,) = _RECORD.unpack_from(data, pos)
        pos += 4
        end = pos + length
        (n,) = _U8.unpack_from(data, pos)
        exchange = data[pos + 1 : pos + 1 + n].decode()
        pos += 1 + n
        (n,) = _U16.unpack_from(data, pos)
        routing_key = data[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        (n,) = _U16.unpack_from(data, pos)
        pos += 2
        filter_value = None
        if n != NO_FILTER:
            filter_value = data[pos : pos + n].decode()
            pos += n
        records.append(Record(offset, exchange, routing_key, filter_value, data[pos:end]))
        pos = end
        offset += 1
    return records
