"""`python -m research.cwm ...`: what `spielbus cwm ...` hands over to."""

from __future__ import annotations

import sys

from research.cwm.cli import main

if __name__ == "__main__":
    sys.exit(main())
