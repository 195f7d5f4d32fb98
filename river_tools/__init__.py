"""Tools built on the drivers, not part of either: the ``river`` command, the benchmark
runners, the demo, the worker scaffold and the pytest plugin."""
