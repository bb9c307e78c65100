"""glibc's own heap totals of a running node, for bench/quorum_deep.py.

RSS says what the process holds from the OS; it does not say how much of it
the program still uses. glibc keeps freed chunks in its arenas (one per
thread that allocates, up to 8 per core), so after a burst RSS can stay far
above what is live. `malloc_stats()` prints both totals to the process's
stderr; gdb calls it in the stopped process (a pause of a second or so, so
only at rest), and the figures are read back from the node's log, where its
stderr goes.

Only meaningful for glibc's allocator: under jemalloc (LD_PRELOAD) the call
has no glibc arenas to report, and the result is None.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_TOTAL = re.compile(r"Total \(incl\. mmap\):\s*\nsystem bytes\s*=\s*(\d+)\s*\nin use bytes\s*=\s*(\d+)")


def heap_totals(pid: int, log_path: Path, timeout: float = 60.0) -> dict | None:
    """{"system": bytes held from the OS, "in_use": bytes in live chunks} of
    `pid`'s glibc heap (mmapped chunks included), or None if gdb or the
    figures are missing."""
    before = _size(log_path)
    try:
        subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "call (void)malloc_stats()"],
                       capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        with open(log_path, "rb") as f:
            f.seek(before)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    found = _TOTAL.findall(text)
    if not found:
        return None
    system, in_use = found[-1]
    return {"system": int(system), "in_use": int(in_use)}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
