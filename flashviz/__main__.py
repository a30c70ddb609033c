"""`python -m flashviz bench|check ...`: see flashviz.cli."""

import sys

from flashviz.cli import main

if __name__ == "__main__":
    sys.exit(main())
