"""RFC 1982 serial-number arithmetic on 32-bit sequence numbers.

Delivery-count, delivery-id and transfer-id wrap at 2^32 [2.8.8], [2.8.9];
every comparison of them goes through here (STYLE.md, rule 5).
"""

MOD = 1 << 32
HALF = 1 << 31
MASK = MOD - 1


def add(a: int, n: int) -> int:
    """a + n, wrapping at 2^32."""
    return (a + n) & MASK


def diff(a: int, b: int) -> int:
    """The signed distance a - b, in (-2^31, 2^31]."""
    d = (a - b) & MASK
    return d - MOD if d > HALF else d


def lt(a: int, b: int) -> bool:
    return a != b and ((b - a) & MASK) < HALF


def le(a: int, b: int) -> bool:
    return a == b or lt(a, b)


def in_range(x: int, first: int, last: int) -> bool:
    """first <= x <= last in serial order."""
    return ((x - first) & MASK) <= ((last - first) & MASK)
