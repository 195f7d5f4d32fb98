"""The parts of both drivers' test helpers that do not wait (builders, expectations, runs)."""
