"""Rule modules. Importing this package registers every rule in core.REGISTRY.

Every module in this package is imported (pkgutil), so a new rule family only
needs a new module here; nothing else has to be edited.
"""
import importlib
import pkgutil

for _m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _m.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_m.name}")
