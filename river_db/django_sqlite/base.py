"""Django's own SQLite backend, connecting through sqlean-py instead of the interpreter's sqlite3.

River's schema needs SQLite >= 3.45 (JSONB), older than many Pythons' sqlite3. With this
backend Django's connection is a sqlean connection, so ``tx=django.db.connection`` inside
``transaction.atomic()`` puts a job in the same SQLite transaction as the model rows.

Everything else is Django's ``django.db.backends.sqlite3``: its connection setup and cursor
creation run unchanged, only resolved against sqlean (their module globals swapped), and the
converters and adapters Django registers on ``sqlite3`` are registered on sqlean too.
"""

from __future__ import annotations

import itertools
import sqlite3
import types
from collections.abc import Iterable, Mapping
from typing import Any

import sqlean  # type: ignore[import-untyped]
from django.db.backends.sqlite3 import base as django_sqlite  # type: ignore[import-untyped]
from django.utils.asyncio import async_unsafe  # type: ignore[import-untyped]

# Django registered these on the stdlib module when its backend was imported (above).
for _name, _converter in sqlite3.converters.items():
    sqlean.register_converter(_name, _converter)
for (_type, _protocol), _adapter in sqlite3.adapters.items():
    if _protocol is sqlite3.PrepareProtocol:
        sqlean.register_adapter(_type, _adapter)


class SQLiteCursorWrapper(sqlean.Cursor):  # type: ignore[misc]
    """Django's ``format``/``pyformat`` parameters on a sqlean cursor (as Django's own wrapper does
    for sqlite3; its conversion is reused, the cursor base class can't be)."""

    convert_query = django_sqlite.SQLiteCursorWrapper.convert_query

    def execute(self, query: str, params: Any = None) -> Any:
        if params is None:
            return super().execute(query)
        names = list(params) if isinstance(params, Mapping) else None
        return super().execute(self.convert_query(query, param_names=names), params)

    def executemany(self, query: str, param_list: Iterable[Any]) -> Any:
        peek, param_list = itertools.tee(iter(param_list))
        first = next(peek, None)
        names = list(first) if isinstance(first, Mapping) else None
        return super().executemany(self.convert_query(query, param_names=names), param_list)


def _on_sqlean(method: Any) -> Any:
    """Django's ``method`` with its module's ``Database`` and cursor wrapper resolved to sqlean's."""
    fn = getattr(method, "__wrapped__", method)
    scope = {**vars(django_sqlite), "Database": sqlean, "SQLiteCursorWrapper": SQLiteCursorWrapper}
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


class DatabaseWrapper(django_sqlite.DatabaseWrapper):  # type: ignore[misc]
    Database = sqlean
    get_new_connection = async_unsafe(_on_sqlean(django_sqlite.DatabaseWrapper.get_new_connection))
    create_cursor = _on_sqlean(django_sqlite.DatabaseWrapper.create_cursor)
