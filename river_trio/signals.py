"""Run_until_signalled: ``river_async.signals``, kept at this import path."""

from river_async.signals import (
    DEFAULT_SIGNALS,
    run_until_signalled,
)

__all__ = ["DEFAULT_SIGNALS", "run_until_signalled"]
