"""The clock faults' commands, run inside a node's container (ComposeCluster.clock_jump,
clock_drift, clock_reset; the nemesis kinds clock-jump and clock-drift).

Each chaos node runs under libfaketime (deploy/entrypoint.sh, WARREN_FAKETIME_FILE in
docker-compose.chaos.yml): its wall clock is the real one plus the offset written in
FAKETIME_FILE ("+60", "-12.5"), which libfaketime reads again once a second
(FAKETIME_CACHE_DURATION=1), so rewriting the file moves the running node's clock within a
second. Its monotonic clocks are never faked (FAKETIME_DONT_FAKE_MONOTONIC).

- a jump writes one offset, "+N" or "-N" seconds;
- a drift starts a writer process in the container that sets the offset to (rate - 1) times
  the real seconds since the drift began, every DRIFT_EVERY seconds: the node's wall clock
  runs `rate` times as fast as real time, in steps of (rate - 1) s, since the node reads the
  file once a second.
  (libfaketime's own "x<rate>" modifier counts from the process's start, so setting it on a
  node up for minutes jumps its clock first, and with FAKETIME_XRESET the offset it built up
  stays after the rate goes back to 1: neither can be undone exactly, a writer can);
- a reset kills the writer (SIGKILL, then waits until it is gone, so no late write follows)
  and writes "+0": the true time again.

Files are replaced whole (write a temporary file, rename it), so the node never reads half an
offset. The writer runs the container's python3 through `docker exec`, which does not go
through the entrypoint: its own clock is the real one.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from email.utils import parsedate_to_datetime
from typing import Any

FAKETIME_FILE = "/tmp/warren-faketime.rc"  # docker-compose.chaos.yml's WARREN_FAKETIME_FILE
DRIFT_EVERY = 0.1  # seconds between the drift writer's offsets

_DRIFT_WRITER = """\
import os, sys, time
path, rate, every = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
start = time.monotonic()
while True:
    with open(path + ".tmp", "w") as f:
        f.write("%+.3f\\n" % ((rate - 1) * (time.monotonic() - start)))
    os.replace(path + ".tmp", path)
    time.sleep(every)
"""


def offset_spec(seconds: float) -> str:
    """libfaketime's relative offset: "+60", "-12.5"."""
    return f"{seconds:+.3f}".rstrip("0").rstrip(".")


def jump_command(seconds: float, path: str = FAKETIME_FILE) -> list[str]:
    """The wall clock `seconds` off the true time from now on (a step, as settimeofday)."""
    return ["sh", "-c", f'echo "{offset_spec(seconds)}" > {path}.tmp && mv -f {path}.tmp {path}']


def drift_command(rate: float, path: str = FAKETIME_FILE, python: str = "python3") -> list[str]:
    """Start the drift writer (run it detached); its pid goes to `path`.drift.pid."""
    if rate <= 0:
        raise ValueError(f"a clock's rate must be positive, not {rate}")
    return ["sh", "-c", f'echo $$ > {path}.drift.pid && exec {python} -c "$0" {path} {rate} {DRIFT_EVERY}',
            _DRIFT_WRITER]  # fmt: skip


def reset_command(path: str = FAKETIME_FILE) -> list[str]:
    """Stop a drift writer if one runs, then the true time ("+0")."""
    script = (
        f"if [ -f {path}.drift.pid ]; then pid=$(cat {path}.drift.pid); kill -9 $pid 2>/dev/null; "
        # gone, or a zombie waiting for its parent: either way it writes no more
        f'while [ -d /proc/$pid ] && ! grep -q "^State:.*Z" /proc/$pid/status 2>/dev/null; do sleep 0.02; done; '
        f"rm -f {path}.drift.pid; fi; "
        f'echo "+0" > {path}.tmp && mv -f {path}.tmp {path}'
    )
    return ["sh", "-c", script]


def observed_offset(host: str, port: int = 15672, timeout: float = 5.0) -> float:
    """The node's wall clock minus this machine's, as the Date header of its HTTP API's
    answer says (any answer: a 401 has one too); whole seconds, so within about 1 s."""
    before = time.time()
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/overview", timeout=timeout) as answer:
            headers = answer.headers
    except urllib.error.HTTPError as e:
        headers = e.headers
    after = time.time()
    # the header truncates to the second: +0.5 puts it in the middle of that second
    return parsedate_to_datetime(headers["Date"]).timestamp() + 0.5 - (before + after) / 2


class ClockFaults:
    """ComposeCluster's clock faults (its `exec`, `container`, `ip`, `_nemesis` and `clocks`),
    each recorded in the history as process "nemesis" with the node's clock offset as its HTTP
    API then showed it (`observed`, seconds; None when it did not answer)."""

    clocks: dict[str, str]  # node -> its wall clock's fault ("+60s", "x1.5") until reset
    exec: Any
    container: Any
    ip: Any
    _nemesis: Any
    faketime: frozenset[str]

    def _needs_faketime(self, kind: str, node: str) -> None:
        if node not in self.faketime:
            raise ValueError(f"{kind} of {node} needs it under libfaketime (ComposeCluster's faketime)")

    def clock_offset(self, node: str, expected: float | None = None, timeout: float = 3.0) -> float | None:
        """The node's clock offset as its HTTP API shows it; with `expected`, read again until
        within 0.6 s of it (the Date header's second, and the request) or `timeout` passes (the
        node reads the file once a second)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                seen: float | None = round(observed_offset(self.ip(node)), 1)
            except (OSError, KeyError, TypeError, ValueError):
                seen = None
            if expected is None or (seen is not None and abs(seen - expected) <= 0.6) or time.monotonic() > deadline:
                return seen
            time.sleep(0.2)

    def clock_jump(self, node: str, seconds: float) -> None:
        """Step `node`'s wall clock `seconds` off the true time (libfaketime's offset file, see
        above); its monotonic clock does not move, as with a real step."""
        self._needs_faketime("clock-jump", node)
        with self._nemesis("clock-jump", {"node": node, "seconds": seconds}, node) as op:
            self.exec(node, *jump_command(seconds))
            self.clocks[node] = offset_spec(seconds) + "s"
            op.ok(observed=self.clock_offset(node, expected=seconds))

    def clock_drift(self, node: str, rate: float) -> None:
        """From now on `node`'s wall clock runs `rate` times as fast as real time (a writer in its
        container moves the offset, see above); its monotonic clock keeps the real rate."""
        self._needs_faketime("clock-drift", node)
        with self._nemesis("clock-drift", {"node": node, "rate": rate}, node):
            self.container(node).exec_run(drift_command(rate), detach=True)
            self.clocks[node] = f"x{rate}"

    def clock_reset(self, node: str) -> None:
        """`node`'s wall clock back to the true time (a drift's writer stopped first)."""
        with self._nemesis("clock-reset", {"node": node, "was": self.clocks.get(node)}, node) as op:
            before = self.clock_offset(node)
            self.exec(node, *reset_command())
            self.clocks.pop(node, None)
            op.ok(observed_before=before, observed=self.clock_offset(node, expected=0))
