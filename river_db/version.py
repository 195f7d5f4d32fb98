"""The project's one version: ``version`` in pyproject.toml, as the installed distribution reports it.

Every package that shows a version (``river_db``, the clients' ``__version__``, ``river
--version``) asks this function, so none keeps a copy that could drift from pyproject.toml.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "river-python"
# PEP 440's local-version form for "not installed": sorts below every real release.
UNKNOWN_VERSION = "0+unknown"


def package_version() -> str:
    """The installed ``river-python`` distribution's version; ``"0+unknown"`` when it is not installed
    (the packages imported from a bare checkout on ``PYTHONPATH``)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN_VERSION
