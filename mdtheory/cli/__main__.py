"""``python -m mdtheory.cli`` runs the command-line interface, as ``python -m mdtheory`` does."""

import sys

from . import main

sys.exit(main())
