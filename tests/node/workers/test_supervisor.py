"""node/workers/supervisor.py, with real processes: a worker killed with -9 is
started again while the others go on, SIGTERM stops every worker, a
supervisor killed with -9 takes its workers with it, a worker K >= 1 that keeps
exiting is lost (listed, worker 0 told) while the node goes on, and a worker
that cannot run stops the node with a status that says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# A worker: writes "<pid>" to <dir>/<k>.pid once running; on SIGTERM writes <dir>/<k>.stopped and exits 0.
# With a status argument it exits with it instead, once worker 0 runs (so that its stop is seen).
# Worker 0 tells the supervisor it is ready (SIGUSR1) once running, or, while <dir>/hold exists,
# once <dir>/go does. Told of a lost worker (SIGUSR2), it copies <dir>/lost to <dir>/<k>.told.
WORKER = """
import os, signal, sys, pathlib, time
k = os.environ["WARREN_WORKER"]
d = pathlib.Path(sys.argv[1])
if len(sys.argv) > 2:
    while not (d / "0.pid").exists():
        time.sleep(0.01)
    sys.exit(int(sys.argv[2]))
def stop(*_):
    (d / f"{k}.stopped").write_text("")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGUSR2, lambda *_: (d / f"{k}.told").write_text(open(d / "lost").read()))
(d / f"{k}.pid.tmp").write_text(str(os.getpid()))
os.replace(d / f"{k}.pid.tmp", d / f"{k}.pid")
if k == "0":
    while (d / "hold").exists() and not (d / "go").exists():
        time.sleep(0.01)
    os.kill(os.getppid(), signal.SIGUSR1)
while True:
    signal.pause()
"""

# The supervisor: argv[1] the directory, argv[2:] per worker an exit status or "-" (runs until
# stopped); with LOST set, lost workers are listed in <dir>/lost.
SUPERVISOR = """
import logging, os, sys
from node.workers.supervisor import Supervisor
logging.basicConfig(level=logging.INFO)
d = sys.argv[1]
commands = [[sys.executable, "-c", WORKER, d] + ([] if a == "-" else [a]) for a in sys.argv[2:]]
lost = os.path.join(d, "lost") if os.environ.get("LOST") else None
sys.exit(Supervisor(commands, backoff=(0.0, 0.2), give_up=(3, 30.0), grace=5.0, lost=lost).run())
"""


def supervise(tmp: Path, *workers: str, lost: bool = False) -> subprocess.Popen:
    script = f"WORKER = {WORKER!r}\n{SUPERVISOR}"
    env = dict(os.environ, LOST="1") if lost else None
    return subprocess.Popen([sys.executable, "-c", script, str(tmp), *workers], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


def pid_of(tmp: Path, k: int, other_than: int | None = None, timeout: float = 15.0) -> int:
    """Worker k's pid once it runs (a new one, when `other_than` is its last)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int((tmp / f"{k}.pid").read_text())
        except (FileNotFoundError, ValueError):
            pid = None
        if pid is not None and pid != other_than:
            return pid
        time.sleep(0.02)
    raise AssertionError(f"worker {k} did not start")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"


def wait_dead(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.02)


@pytest.fixture
def stop_all():
    procs: list[subprocess.Popen] = []
    yield procs.append
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_other_workers_start_once_worker_0_says_it_is_ready(tmp_path, stop_all):
    (tmp_path / "hold").write_text("")
    sup = supervise(tmp_path, "-", "-", "-")
    stop_all(sup)
    first = pid_of(tmp_path, 0)
    with pytest.raises(AssertionError):  # worker 0 runs, not ready yet: nobody else starts
        pid_of(tmp_path, 1, timeout=1.0)
    (tmp_path / "go").write_text("")
    assert {pid_of(tmp_path, 1), pid_of(tmp_path, 2)}.isdisjoint({first})
    os.kill(first, signal.SIGKILL)  # worker 0 again: the others already run and stay
    others = pid_of(tmp_path, 1), pid_of(tmp_path, 2)
    assert pid_of(tmp_path, 0, other_than=first) != first
    assert all(alive(pid) for pid in others) and (pid_of(tmp_path, 1), pid_of(tmp_path, 2)) == others
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(15) == 0


def test_a_worker_killed_with_minus_9_is_started_again_and_the_others_keep_running(tmp_path, stop_all):
    sup = supervise(tmp_path, "-", "-")
    stop_all(sup)
    first, second = pid_of(tmp_path, 0), pid_of(tmp_path, 1)
    os.kill(second, signal.SIGKILL)
    again = pid_of(tmp_path, 1, other_than=second)
    assert again != second and alive(again)
    assert pid_of(tmp_path, 0) == first and alive(first)
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(15) == 0
    assert (tmp_path / "0.stopped").exists() and (tmp_path / "1.stopped").exists()
    assert not alive(first) and not alive(again)
    assert "worker 1 exited with -9; starting it again" in sup.stderr.read()


def test_a_supervisor_killed_with_minus_9_takes_its_workers_with_it(tmp_path, stop_all):
    sup = supervise(tmp_path, "-", "-")
    stop_all(sup)
    workers = [pid_of(tmp_path, 0), pid_of(tmp_path, 1)]
    sup.kill()
    sup.wait()
    for pid in workers:
        wait_dead(pid)
    assert not (tmp_path / "0.stopped").exists()  # killed, not stopped: the node crashed as a whole


def test_a_worker_that_keeps_exiting_stops_the_node_with_ex_software(tmp_path, stop_all):
    sup = supervise(tmp_path, "-", "1")
    stop_all(sup)
    assert sup.wait(15) == 70
    assert (tmp_path / "0.stopped").exists()  # the healthy worker was stopped, not left behind
    err = sup.stderr.read()
    assert err.count("worker 1 exited with 1; starting it again") == 2
    assert "worker 1 exited 3 times in 30 s" in err


def test_a_worker_that_keeps_exiting_is_lost_and_worker_0_told_while_the_node_goes_on(tmp_path, stop_all):
    (tmp_path / "lost").write_text("[2]")  # an earlier run's list: not this one's
    sup = supervise(tmp_path, "-", "1", "-", lost=True)
    stop_all(sup)
    first, third = pid_of(tmp_path, 0), pid_of(tmp_path, 2)
    deadline = time.monotonic() + 15
    while not (tmp_path / "0.told").exists():
        assert time.monotonic() < deadline, "worker 0 was not told"
        assert sup.poll() is None, "the node stopped"
        time.sleep(0.02)
    assert (tmp_path / "0.told").read_text() == "[1]" == (tmp_path / "lost").read_text()
    assert alive(first) and alive(third)
    os.kill(first, signal.SIGKILL)  # worker 0 again: told once it is ready, and worker 1 stays down
    (tmp_path / "0.told").unlink()
    pid_of(tmp_path, 0, other_than=first)
    while not (tmp_path / "0.told").exists():
        assert time.monotonic() < deadline, "worker 0 was not told again"
        time.sleep(0.02)
    sup.send_signal(signal.SIGTERM)
    assert sup.wait(15) == 0
    err = sup.stderr.read()
    assert err.count("worker 1 exited with 1; starting it again") == 2
    assert "worker 1 exited 3 times in 30 s (last status 1): it stays down until the node restarts" in err
    assert not (tmp_path / "2.told").exists()


def test_worker_0_that_keeps_exiting_stops_the_node_even_where_others_may_be_lost(tmp_path, stop_all):
    (tmp_path / "hold").write_text("")  # worker 0 never says it is ready; killed three times
    sup = supervise(tmp_path, "-", "-", lost=True)
    stop_all(sup)
    pid = None
    for _ in range(3):
        pid = pid_of(tmp_path, 0, other_than=pid)
        os.kill(pid, signal.SIGKILL)
    assert sup.wait(15) == 70
    assert "worker 0 exited 3 times in 30 s" in sup.stderr.read()


@pytest.mark.parametrize("status", [69, 78])
def test_a_worker_that_says_a_restart_will_not_help_stops_the_node_with_its_status(tmp_path, stop_all, status):
    sup = supervise(tmp_path, "-", str(status))
    stop_all(sup)
    assert sup.wait(15) == status
    assert (tmp_path / "0.stopped").exists()
    assert "starting it again" not in sup.stderr.read()
