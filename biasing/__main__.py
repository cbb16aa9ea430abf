"""``python -m biasing ...`` (see ``biasing.cli``)."""

from biasing.cli import main

raise SystemExit(main())
