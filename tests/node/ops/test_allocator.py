"""glibc malloc settings applied at start (node/ops/allocator.py), checked
against the real allocator in a fresh interpreter: mallopt is process-wide,
so the test process itself is left alone."""

import json
import os
import subprocess
import sys

import pytest

from node.ops.allocator import M_ARENA_MAX, M_MMAP_THRESHOLD, apply_malloc_settings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Counts glibc's mmapped chunks (mallinfo2's hblks) while 40 buffers of 200 KB
# are alive: with glibc's dynamic threshold, freeing one such buffer raises the
# threshold above 200 KB and the rest come from the heap; with a fixed
# threshold of 128 KiB every one of them is mapped (and unmapped when freed).
_PROBE = r"""
import ctypes, json, sys
sys.path.insert(0, sys.argv[1])
from node.ops.allocator import apply_malloc_settings

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
applied = apply_malloc_settings(int(sys.argv[2]), int(sys.argv[3]), env={})
libc.free(libc.malloc(300 * 1024))  # a big block freed: glibc's dynamic threshold rises past it
held = [libc.malloc(200 * 1024) for _ in range(40)]
mapped = libc.mallinfo2().hblks
for p in held:
    libc.free(p)
print(json.dumps({"applied": applied, "mapped": mapped}))
"""


def _probe(arena_max: int, threshold: int) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, REPO, str(arena_max), str(threshold)], capture_output=True,
                         text=True, check=True, env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")})  # fmt: skip
    return json.loads(out.stdout)


def _glibc() -> bool:
    return os.confstr("CS_GNU_LIBC_VERSION") is not None if hasattr(os, "confstr") else False


@pytest.mark.skipif(not _glibc(), reason="glibc's mallopt")
def test_fixed_mmap_threshold_maps_big_buffers_that_glibc_would_keep_in_the_heap():
    default = _probe(0, 0)
    fixed = _probe(2, 128 * 1024)
    assert default["applied"] == {}
    assert default["mapped"] < 40  # the dynamic threshold moved past 200 KB
    assert fixed["applied"] == {"arena_max": 2, "mmap_threshold": 128 * 1024}
    assert fixed["mapped"] >= 40


def test_a_variable_in_the_environment_wins_and_zero_leaves_the_default():
    calls = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    applied = apply_malloc_settings(2, 131072, env={"MALLOC_ARENA_MAX": "4"}, mallopt=mallopt)
    assert applied == {"mmap_threshold": 131072}
    assert calls == [(M_MMAP_THRESHOLD, 131072)]
    calls.clear()
    assert apply_malloc_settings(0, 131072, env={}, mallopt=mallopt) == {"mmap_threshold": 131072}
    assert calls == [(M_MMAP_THRESHOLD, 131072)]
    calls.clear()
    assert apply_malloc_settings(2, 0, env={}, mallopt=mallopt) == {"arena_max": 2}
    assert calls == [(M_ARENA_MAX, 2)]


def test_a_refused_setting_is_not_reported_as_applied():
    assert apply_malloc_settings(2, 131072, env={}, mallopt=lambda param, value: 0) == {}
