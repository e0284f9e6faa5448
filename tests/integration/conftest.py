"""tests/integration: make the shared helper module (integ_common.py) importable."""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
# appended, not prepended: a folder on sys.path can shadow same-named modules of other test folders,
# and this one only needs integ_common.py to be importable
if _HERE not in sys.path:
    sys.path.append(_HERE)
