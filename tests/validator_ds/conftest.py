"""pytest entry for tests/validator_ds: the fixtures and helpers live in ds_support.py.

Test modules import helpers with `from ds_support import ...`, never `from conftest import ...`: several
test folders have a conftest.py, and which one a bare `import conftest` finds depends on the order
pytest loaded the folders in.
"""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from ds_support import *  # noqa: E402,F401,F403 - the fixtures
