"""Family modules; importing this package registers every family in `FAMILIES`.

Every module in this package is imported (sorted by name, so registration order is stable);
a new family needs only its own module here.
"""

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_mod}")
