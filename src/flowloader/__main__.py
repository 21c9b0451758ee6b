"""``python -m flowloader``: the same entry point as the ``flowloader`` command."""

import sys

from .cli.main import main

sys.exit(main())
