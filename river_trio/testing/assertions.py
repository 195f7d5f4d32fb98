"""Assertions about inserted jobs: ``river_anyio.testing.assertions``, kept at this import path."""

from river_anyio.testing.assertions import (
    ExpectedJob,
    InsertedJob,
    jobs_of_kinds,
    reading,
    require_inserted,
    require_many_inserted,
    require_not_inserted,
)

__all__ = ["ExpectedJob", "InsertedJob", "jobs_of_kinds", "reading", "require_inserted",
           "require_many_inserted", "require_not_inserted"]
