"""Speed and memory figures, printed (``nox -s bench`` / ``python -m benchmarks``); never asserted."""
