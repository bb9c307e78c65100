"""Warren's AMQP 1.0 core: codec, framing and the connection/session/link engine.

Everything in this package is sans-I/O: bytes in, events and bytes out. No
module here may import asyncio, socket, grpc or uvloop (tests/test_sans_io.py).
"""
