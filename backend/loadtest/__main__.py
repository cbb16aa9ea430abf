"""``python -m backend.loadtest``: see ``backend.loadtest.cli``."""

import sys

from backend.loadtest.cli import main

sys.exit(main())
