"""``python -m tlsite``."""

import sys

from tlsite.cli import main

sys.exit(main())
