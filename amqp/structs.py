"""The fixed-width layouts of AMQP 1.0's wire format, in one table: network
byte order [1.2], the widths of the primitive types [1.6], the size-and-count
head of a compound value [1.6.22], the frame header [2.3.1].

The encoder, the decoder, the framing and the hand-written fast paths use
these, and so do the tests that build or read bytes by hand: one spelling of
each layout.

The library binds each under a name of its own, assigned rather than imported
(`_u32 = structs.U32`, not `from .structs import U32`): CPython 3.11 compiles
`U32.pack(v)` on an imported name as an attribute load that makes a bound
method on every call (about 40 ns, a fifth of encoding a uint), and
`_u32.pack(v)` as a plain method call.
"""

from __future__ import annotations

import struct

U8 = struct.Struct(">B")
U16 = struct.Struct(">H")
U32 = struct.Struct(">I")
U64 = struct.Struct(">Q")
I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
F32 = struct.Struct(">f")
F64 = struct.Struct(">d")
SIZE_COUNT32 = struct.Struct(">II")  # a list32, map32 or array32: size, then count
FRAME_HEADER = struct.Struct(">IBBH")  # size, doff, type, channel
