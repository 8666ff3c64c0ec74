"""`python -m mirrorbook.cli`: the `mirrorbook` command."""

import sys

from mirrorbook.cli import main

if __name__ == "__main__":
    sys.exit(main())
