"""``python -m pyroscope``: see pyroscope.cli."""

import sys

from pyroscope.cli import main

if __name__ == "__main__":
    sys.exit(main())
