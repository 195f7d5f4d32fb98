"""Transaction(client): ``river_async.transactions``, kept at this import path."""

from river_async.transactions import (
    transaction,
)

__all__ = ["transaction"]
