"""Helper package for check_backend_availability.py (standard library only).

Nothing in this package imports a package it reports on: versions come from
``*.dist-info`` / ``*.egg-info`` directories found on ``sys.path`` and build
facts from plain files read as text.  Imports happen only in child processes
started by :mod:`availability.children` (``--probe``, ``--include-cuda``).
"""

from .version import bundle_version as _bundle_version

CHECKER_VERSION = _bundle_version()  # the bundle version (VERSION file at the bundle root)
SCHEMA_VERSION = 1
