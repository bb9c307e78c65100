"""Puts tests/support/ on sys.path: the helper modules that tests in several
directories share (raw_client, rmq_client, mgmt_client, cluster_procs) are
imported by their bare names from there. pytest runs with
--import-mode=importlib, which puts no test directory on sys.path; helpers
used by one directory only sit next to its tests, put on sys.path by that
directory's conftest.py.

Every `warren server` a test starts runs one worker unless the test asks for
more: the node's default, one worker per usable core, would make each node of
the suite a supervisor and two workers on CI's two cores. tests/node/cluster/
runs its nodes with 2 (its conftest.py: `WARREN_CLUSTER_WORKERS`).
`WARREN_WORKERS=N make test` runs every other node with N."""

import os
import sys
from pathlib import Path

os.environ.setdefault("WARREN_WORKERS", "1")

SUPPORT = str(Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)
