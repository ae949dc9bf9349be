"""Family modules; importing this package registers every family in `FAMILIES`.

The modules live in one room per task kind: `c2cuda/` (a C function to port) and
`torch2cuda/` (a PyTorch module to replace). Every module of both is imported in the order of
its own name across the two rooms (the order the registry had when they shared one folder),
so registration order, and with it every generated task set, stays the same; a new family
needs only its own module in its kind's room.
"""

import importlib
import pkgutil

_ROOMS = ("c2cuda", "torch2cuda")

for _name, _room in sorted(
    (m.name, room) for room in _ROOMS for m in pkgutil.iter_modules([f"{__path__[0]}/{room}"])
):
    importlib.import_module(f"{__name__}.{_room}.{_name}")
