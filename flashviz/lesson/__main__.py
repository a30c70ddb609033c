"""`python -m flashviz.lesson --check` runs every step's check; `--write docs/lesson.md` writes the lesson page."""

import sys

from flashviz.lesson.steps import main

sys.exit(main())
