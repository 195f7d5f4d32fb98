"""``python -m river_tools.cli``: the ``river`` command."""

import sys

from river_tools.cli.main import main

sys.exit(main())
