"""glibc malloc settings the node applies to itself at start.

A deep quorum queue passes every body through the heap several times (the
frame read, the Publish entry of a few hundred KB, RocksDB's write batch and
memtable blocks, the bodies kept until their write is flushed), and most of
it is freed within a loop turn or two. With glibc's defaults the freed memory
stays in the process: one arena per thread that allocates (up to 8 per core),
and a mmap threshold that rises to the largest block freed so far (up to
32 MiB), after which every big buffer comes from an arena too and leaves
holes there that the next small objects pin. Measured on 3 nodes with 1M x
1 KB in a quorum queue (docs/benchmarks.md, "Quorum RSS per 1M, the
allocator"): RSS grew 114-186 MiB per replica with the defaults, of which
glibc said only 29-35 MB was in use; with 2 arenas and a fixed mmap
threshold it grew 32-62 MiB, held and in use nearly equal. The threshold is
1 MiB rather than glibc's initial 128 KiB: every mapped block is faulted in
page by page when first touched, and at 128 KiB the publishing node took 12.7
page faults per message (0.7 with the defaults, 4.4 at 1 MiB).

The same settings can be given as glibc's environment variables
(MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_); where one is set it wins and
the setting here is not applied. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable

__all__ = ["apply_malloc_settings"]

log = logging.getLogger("warren.memory")

# mallopt parameters (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


def _load_mallopt() -> Callable[[int, int], int] | None:
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt  # glibc (and musl lacks it)
    except (OSError, AttributeError, TypeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def apply_malloc_settings(arena_max: int, mmap_threshold: int, env: dict | None = None,
                          mallopt: Callable[[int, int], int] | None = None) -> dict[str, int]:  # fmt: skip
    """Sets glibc's arena limit and a fixed mmap threshold (bytes) unless 0
    or given in the environment; returns what was set. Call it before the
    node starts threads: arenas are created as threads first allocate."""
    env = os.environ if env is None else env
    mallopt = mallopt or _load_mallopt()
    applied: dict[str, int] = {}
    if mallopt is None:
        return applied
    for name, param, value, env_name in (
        ("arena_max", M_ARENA_MAX, arena_max, "MALLOC_ARENA_MAX"),
        # a fixed threshold also stops glibc raising it (and the trim threshold) as big blocks are freed
        ("mmap_threshold", M_MMAP_THRESHOLD, mmap_threshold, "MALLOC_MMAP_THRESHOLD_"),
    ):
        if value > 0 and env_name not in env:
            if mallopt(param, value) == 1:
                applied[name] = value
            else:
                log.warning("mallopt(%s, %d) refused", name, value)
    return applied
