"""``python -m tlsite``."""

import sys

from tlsite.cli import console_main

if __name__ == "__main__":  # worker processes import this module too: only run when asked
    sys.exit(console_main())
