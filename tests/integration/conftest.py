"""tests/integration: make the shared helper module (integ_common.py) importable."""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
# appended, not prepended: other test folders import their own `conftest` by name from sys.path, and
# this folder's conftest.py must never shadow theirs (whatever order pytest loads the folders in)
if _HERE not in sys.path:
    sys.path.append(_HERE)
