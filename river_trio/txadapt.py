"""Async executors inside a caller transaction: ``river_anyio.txadapt``, kept at this import path."""

from river_anyio.txadapt import (
    executor_for_caller_tx,
)

__all__ = ["executor_for_caller_tx"]
