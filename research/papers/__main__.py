"""`python -m research.papers ...`: what `spielbus paper ...` hands over to."""

from __future__ import annotations

import sys

from research.papers.cli import main

if __name__ == "__main__":
    sys.exit(main())
