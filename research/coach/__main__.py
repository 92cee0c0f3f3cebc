"""`python -m research.coach ...`: what `spielbus selfplay ...` hands over to."""

from __future__ import annotations

import sys

from research.coach.cli import main

if __name__ == "__main__":
    sys.exit(main())
