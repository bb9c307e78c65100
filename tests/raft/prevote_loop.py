"""Runs the stale-member scenario of test_prevote.py many times and counts the outcomes.

Not collected by pytest (its name does not start with test_). The scenario is
timing-dependent (real clocks, 0.1-0.2 s election timeouts), so a rare hole
shows only over many runs:

    PYTHONPATH=. python tests/raft/prevote_loop.py --runs 60 ours safe-mem

prints, per kind, how many runs passed and where the others failed (test line).
Point PYTHONPATH at another checkout to count its raft/ with this scenario.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).parent
SCENARIO = "test_a_stale_member_returning_from_a_partition_does_not_depose_the_leader"


def _load_tests():
    sys.path.insert(0, str(HERE))  # raft_harness
    spec = importlib.util.spec_from_file_location("test_prevote", HERE / "test_prevote.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _where(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith("test_prevote.py")]
    frame = frames[-1] if frames else traceback.extract_tb(error.__traceback__)[-1]
    return f"{type(error).__name__} at line {frame.lineno}: {frame.line}"


def count(kind: str, runs: int) -> collections.Counter:
    scenario = getattr(_load_tests(), SCENARIO)
    outcomes: collections.Counter = collections.Counter()
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                scenario(kind, Path(tmp))
                outcomes["passed"] += 1
            except Exception as error:  # AssertionError, TimeoutError: both count as a failed run
                outcomes[_where(error)] += 1
    return outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("kinds", nargs="+", help="ours, safe-mem, stock-mem (see raft_harness.py)")
    args = parser.parse_args()
    for kind in args.kinds:
        started = time.monotonic()
        outcomes = count(kind, args.runs)
        load = os.getloadavg()[0]
        print(f"{kind}: {args.runs} runs, {time.monotonic() - started:.0f} s, load {load:.1f}", flush=True)
        for outcome, n in outcomes.most_common():
            print(f"  {n:4d} {outcome}", flush=True)


if __name__ == "__main__":
    main()
