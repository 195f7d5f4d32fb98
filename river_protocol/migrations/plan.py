"""Which versions a migration run applies, in order (River's rules, decided without a database).

``applied`` holds the versions already recorded for the line. Versions outside
``available`` (say, from a newer River) are ignored, as River does.

Up: every unapplied version ascending, up to and including ``target_version``; an up-target
that is already applied means nothing to do (River instead keeps going past it, which no one
should rely on). Down: applied versions descending, one step by default; ``target_version=T``
stops before T, so the schema ends at T, and T must be applied; ``-1`` removes everything.
``max_steps`` caps the count in both directions (``-1`` applies nothing, ``0``/None no cap
beyond the defaults). When both are given, the target bounds the list and ``max_steps`` then
shortens it (River errors on a down-target cut off by ``max_steps``; stopping early is safer).
"""

from __future__ import annotations

from collections.abc import Iterable

from river_protocol.errors import MigrationError
from river_protocol.migrations.bundle import check_direction

MAIN_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
ALL = -1


def plan_migration(
    applied: Iterable[int],
    direction: str,
    target_version: int | None = None,
    max_steps: int | None = None,
    *,
    available: Iterable[int] = MAIN_VERSIONS,
) -> list[int]:
    check_direction(direction)
    known = sorted(set(available))
    done = set(applied) & set(known)
    if target_version is not None and target_version != ALL and target_version not in known:
        raise MigrationError(
            f"version {target_version} is not a valid River migration version "
            f"(known: {known}; use -1 for all)"
        )
    if max_steps is not None and max_steps < 0:
        return []

    if direction == "up":
        steps = [v for v in known if v not in done]
        if target_version is not None and target_version != ALL:
            if target_version in done:
                return []
            steps = [v for v in steps if v <= target_version]
        limit = max_steps or None
    else:
        steps = sorted(done, reverse=True)
        if target_version is None:
            limit = max_steps or 1
        else:
            if target_version != ALL:
                if target_version not in done:
                    raise MigrationError(
                        f"can't migrate down to version {target_version}: it is not applied "
                        f"(applied: {sorted(done)})"
                    )
                steps = [v for v in steps if v > target_version]
            limit = max_steps or None
    return steps[:limit] if limit else steps


def unapplied(
    applied: Iterable[int],
    target_version: int | None = None,
    *,
    available: Iterable[int] = MAIN_VERSIONS,
) -> list[int]:
    """Validation: the sorted versions not yet applied (only those up to ``target_version``)."""
    known = sorted(set(available))
    if target_version is not None and target_version not in known:
        raise MigrationError(f"version {target_version} is not a valid River migration version")
    done = set(applied)
    bound = target_version if target_version is not None else known[-1]
    return [v for v in known if v not in done and v <= bound]
