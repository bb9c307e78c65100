"""The clock faults' commands (chaos_clock.py) run here as they run in a node's container,
on a file of their own: a jump writes its offset, a drift's writer moves the offset at its
rate, and a reset stops the writer for good and writes the true time. (The node reading the
file through libfaketime is test_mixed.py's, with docker.)"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from chaos_clock import drift_command, jump_command, offset_spec, reset_command


def offset(path) -> float:
    return float(path.read_text())


def wait_offset(path, predicate, timeout: float = 10.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = offset(path)
        except (FileNotFoundError, ValueError):  # not written yet
            value = None
        if value is not None and predicate(value):
            return value
        assert time.monotonic() < deadline, f"offset {value} in {timeout}s"
        time.sleep(0.02)


def test_offsets_are_libfaketime_relative_specs():
    assert [offset_spec(s) for s in (60, -300, 12.5, -0.25, 0)] == ["+60", "-300", "+12.5", "-0.25", "+0"]


def test_a_jump_writes_its_offset_and_a_reset_the_true_time(tmp_path):
    path = tmp_path / "clock.rc"
    subprocess.run(jump_command(-120, str(path)), check=True)
    assert path.read_text() == "-120\n"
    subprocess.run(reset_command(str(path)), check=True)
    assert path.read_text() == "+0\n"


@pytest.mark.parametrize("rate", [1.5, 0.5])
def test_a_drift_moves_the_offset_at_its_rate_until_reset(tmp_path, rate):
    path = tmp_path / "clock.rc"
    writer = subprocess.Popen(drift_command(rate, str(path), python=sys.executable))
    try:
        first = wait_offset(path, lambda v: True)
        started = time.monotonic()
        later = wait_offset(path, lambda v: abs(v) >= 0.5)
        elapsed = time.monotonic() - started
        # (rate - 1) s of offset per real second, give or take the writer's 0.1 s steps
        assert (later - first) * (rate - 1) > 0
        assert abs(later - first) == pytest.approx(abs(rate - 1) * elapsed, abs=0.1 + 0.5 * abs(rate - 1))
        subprocess.run(reset_command(str(path)), check=True)
        assert writer.wait(timeout=5) != 0  # killed
        assert not (tmp_path / "clock.rc.drift.pid").exists()
        time.sleep(0.3)  # three of the writer's periods: it would have written by now
        assert path.read_text() == "+0\n"
    finally:
        writer.kill()


def test_a_rate_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        drift_command(0)
