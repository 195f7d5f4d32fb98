"""Where River's own cross-language goldens are read from.

They are River's repository content, not ours: they are read in place from a
directory beside the clone (``<repo>/../shared/river-upstream``, which CI
provides) and never copied into this repository. ``RIVER_UPSTREAM_DIR``
points elsewhere. A missing directory fails under CI (``CI`` set) so that a
broken checkout can't pass by skipping; locally it is reported as missing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

UPSTREAM_ENV = "RIVER_UPSTREAM_DIR"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_UPSTREAM_DIR = REPO_ROOT.parent / "shared" / "river-upstream"


def upstream_dir(options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Path:
    """The goldens' directory: ``options["upstream_dir"]``, else ``$RIVER_UPSTREAM_DIR``, else the default."""
    environ = os.environ if env is None else env
    chosen = (options or {}).get("upstream_dir") or environ.get(UPSTREAM_ENV)
    return Path(chosen) if chosen else DEFAULT_UPSTREAM_DIR


def missing_is_failure(env: Mapping[str, str] | None = None) -> bool:
    """Under CI a missing golden is a failure; elsewhere it is only reported."""
    value = (os.environ if env is None else env).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")
