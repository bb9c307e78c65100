"""Puts tests/support/ on sys.path: the helper modules that tests in several
directories share (raw_client, rmq_client, mgmt_client, cluster_procs) are
imported by their bare names from there. pytest runs with
--import-mode=importlib, which puts no test directory on sys.path; helpers
used by one directory only sit next to its tests, put on sys.path by that
directory's conftest.py."""

import sys
from pathlib import Path

SUPPORT = str(Path(__file__).resolve().parent / "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)
