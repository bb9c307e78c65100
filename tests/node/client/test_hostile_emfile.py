"""Row 3 of issue 14 as it happened: idle sockets use up the node's file
descriptors, the alarm check fails with a real EMFILE, and it must keep
running: once descriptors are free again it works again (it used to be
re-armed only on success, so one EMFILE stopped the alarms for good)."""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
FD_LIMIT = 256


def _limit_fds() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, hard))


class LogWatcher:
    """Collects the node's stderr lines in a thread; `wait_for` blocks on a
    condition until a line matches (or the deadline)."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, pattern: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if re.search(pattern, line):
                        return line
                left = deadline - time.monotonic()
                assert left > 0, f"no log line matching {pattern!r} in:\n{''.join(self.lines[-30:])}"
                self._cond.wait(left)


def test_the_alarm_check_survives_emfile(tmp_path):
    cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", str(tmp_path / "data"), "--amqp-port", "0",
           "--http-port", "-1", "--metrics-port", "-1", "--grpc-port", "0", "--listen-host", "127.0.0.1"]  # fmt: skip
    env = dict(os.environ, WARREN_ALARM_CHECK_INTERVAL="0.05", WARREN_HANDSHAKE_TIMEOUT="0",
               WARREN_SNAPSHOT_INTERVAL="0")  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_limit_fds)  # fmt: skip
    sockets: list[socket.socket] = []
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"listening on amqp://[^:]+:(\d+)", line).group(1))
        log = LogWatcher(proc.stderr)
        # more idle sockets than the node has descriptors left
        for _ in range(FD_LIMIT + 50):
            sockets.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        failed = log.wait_for(r"the resource alarm check failed")
        assert "1 in a row" in failed
        log.wait_for(r"Too many open files|EMFILE")
        for s in sockets:
            s.close()
        sockets.clear()
        log.wait_for(r"the resource alarm check works again")
        # and the node serves: a new connection gets the broker's header back
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"AMQP\x03\x01\x00\x00")
            assert s.recv(8) == b"AMQP\x03\x01\x00\x00"
    finally:
        for s in sockets:
            s.close()
        proc.kill()
        proc.wait(10)
