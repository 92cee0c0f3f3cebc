"""The authority: matches, schedules, records, standings and ratings, and the referee worker."""

import bus  # noqa: F401  first: nats.py without aiohttp (bus/nats_import.py)
