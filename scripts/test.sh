#!/usr/bin/env bash
# Set up everything the tests need on a fresh Debian machine, then run lint and the whole test suite.
# Usage: ./scripts/test.sh [extra pytest args]
#
#   ./scripts/test.sh                                   everything (what CI runs, through .ci/run)
#   ./scripts/test.sh -m "not browser and not slow"     the fast part: no Chromium, no Docker or load test, no
#                                                       big-N kernel cases or long hypothesis runs
#   python scripts/mutants.py                           injects one bug at a time into a copy of the checkout and
#                                                       checks that the fast suite catches each (see its --help)
#
# Reproducible by default: hypothesis draws the same examples on every run (tests/conftest.py). Set
# FLASHVIZ_HYPOTHESIS=explore to draw new examples and look for fresh edge cases.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's Chromium drives the browser tests (playwright's own browser download is not used).
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends chromium
fi

python -m pip install --disable-pip-version-check -r requirements-dev.txt -e .

ruff check .
hadolint --failure-threshold warning Dockerfile
python -m pytest "$@"
