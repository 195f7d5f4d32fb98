"""River's main migration line, and this project's ``python`` line, as package data: one up
and one down script per version.

Scripts are stored per dialect as ``NNN_name.up.sql`` / ``NNN_name.down.sql`` with a schema
placeholder that ``render`` replaces by the dialect's table prefix (``"schema".`` or empty),
including inside string literals such as a ``to_regclass`` argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from river_protocol.errors import MigrationError, ValidationError

SCHEMA_PLACEHOLDER = "/* TEMPLATE: schema */"
LINE_MAIN = "main"
# This project's own line: tables River has no place for (``river_py_*``), one directory per
# dialect beside the main line's scripts (``postgres/python/``, ``sqlite/python/``).
LINE_PYTHON = "python"
LINES: tuple[str, ...] = (LINE_MAIN, LINE_PYTHON)
DIALECTS: tuple[str, ...] = ("postgres", "sqlite")
DIRECTIONS: tuple[str, ...] = ("up", "down")

_FILE_RE = re.compile(r"^(\d{3})_([a-z0-9_]+)\.(up|down)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One version: ``name`` is the file name's words (underscores become spaces), as River shows it."""

    version: int
    name: str
    up_sql: str
    down_sql: str

    def sql(self, direction: str) -> str:
        check_direction(direction)
        return self.up_sql if direction == "up" else self.down_sql


def check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValidationError(f"invalid migration direction {direction!r}: must be 'up' or 'down'")
    return direction


def check_line(line: str) -> str:
    if line not in LINES:
        close = [known for known in LINES if _edit_distance(known, line) <= 2]
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise MigrationError(
            f"migration line does not exist: {line!r}{hint}; known lines: {', '.join(LINES)}"
        )
    return line


def render(sql: str, prefix: str) -> str:
    """``sql`` with every schema placeholder replaced by ``prefix`` (``'"schema".'`` or ``''``)."""
    return sql.replace(SCHEMA_PLACEHOLDER, prefix)


def migrations_for(dialect_name: str, line: str = LINE_MAIN) -> list[Migration]:
    """The ``line``'s migrations for ``dialect_name`` ("postgres" or "sqlite"), ascending."""
    if dialect_name not in DIALECTS:
        raise ValidationError(
            f"unknown dialect {dialect_name!r}: must be one of {', '.join(DIALECTS)}"
        )
    check_line(line)
    return list(_load(dialect_name, line))


def versions_for(dialect_name: str, line: str = LINE_MAIN) -> tuple[int, ...]:
    return tuple(m.version for m in migrations_for(dialect_name, line))


def migration(dialect_name: str, version: int, line: str = LINE_MAIN) -> Migration:
    """One version of the line; an unknown version is a ``MigrationError`` listing the known ones."""
    found = {m.version: m for m in migrations_for(dialect_name, line)}
    if version not in found:
        raise MigrationError(
            f"migration {version} not found (available versions: {sorted(found)})"
        )
    return found[version]


@cache
def _load(dialect_name: str, line: str) -> tuple[Migration, ...]:
    scripts: dict[int, dict[str, str]] = {}
    names: dict[int, str] = {}
    # The scripts ship beside this module like its source; reading them is loading the
    # package, not database I/O (importlib.resources would pull in zipfile and threading).
    folder = Path(__file__).parent / dialect_name
    if line != LINE_MAIN:
        folder = folder / line
    for entry in sorted(folder.iterdir()):
        match = _FILE_RE.match(entry.name)
        if match is None:
            continue
        version = int(match.group(1))
        names[version] = match.group(2).replace("_", " ")
        scripts.setdefault(version, {})[match.group(3)] = entry.read_text(encoding="utf-8")
    loaded = []
    for expected, version in enumerate(sorted(scripts), start=1):
        # A gap or a missing direction is a packaging bug; failing loudly beats a silent skip.
        if version != expected or set(scripts[version]) != {"up", "down"}:
            raise MigrationError(
                f"{dialect_name} {line} migrations are incomplete at version {expected}"
            )
        loaded.append(
            Migration(version, names[version], scripts[version]["up"], scripts[version]["down"])
        )
    return tuple(loaded)


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
