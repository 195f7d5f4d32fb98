"""The ``river`` command line (``river_tools.cli.main:main``)."""
