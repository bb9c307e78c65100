"""Makes the helper modules next to this file importable (pytest runs with
--import-mode=importlib, which does not put test directories on sys.path)."""

import sys
from pathlib import Path

_here = str(Path(__file__).parent)
if _here not in sys.path:
    sys.path.insert(0, _here)

import pytest  # noqa: E402 - after the sys.path change that makes engine_helpers importable
from engine_helpers import Pair  # noqa: E402


@pytest.fixture
def pair():
    """A client and a server engine, connected (SASL done, both OPENs)."""
    p = Pair()
    p.connect()
    return p
