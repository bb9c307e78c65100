"""Makes the helper modules next to this file importable (pytest runs with
--import-mode=importlib, which does not put test directories on sys.path)."""

import sys
from pathlib import Path

_here = str(Path(__file__).parent)
if _here not in sys.path:
    sys.path.insert(0, _here)
