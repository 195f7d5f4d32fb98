"""The old name of ``river_anyio``, kept so that imports written for it keep working.

The shared AnyIO client was called ``river_async`` until it was renamed to ``river_anyio``,
a name nobody confuses with ``river_asyncio`` (the asyncio face). ``import river_async`` and
``import river_async.X`` give the very module objects of ``river_anyio`` and
``river_anyio.X`` (not copies, so classes and ``isinstance`` checks agree), by a finder that
serves every ``river_async.*`` name from ``river_anyio``. New code imports ``river_anyio``,
or better the faces ``river_trio`` and ``river_asyncio``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

import river_anyio

_OLD = __name__
_NEW = river_anyio.__name__


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``river_async.X`` as the already imported (or now imported) ``river_anyio.X``."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD):])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
sys.modules[_OLD] = river_anyio
