"""One async River client for trio and asyncio, written once on AnyIO.

Users import ``river_trio`` (trio) or ``river_asyncio`` (asyncio): both are
thin faces over this package, with the same names (``river_anyio.exports``)
and their own ``Client`` class bound to their event loop. This package imports
only ``river_protocol``, ``river_db``, AnyIO and sniffio; the few primitives it
takes from trio or asyncio directly sit in ``river_anyio._backend``, which
imports trio only when running under trio.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("river-python")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
