"""The players: strategies, the agent runtime that serves them on the bus, and their command."""

import bus  # noqa: F401  first: nats.py without aiohttp (bus/nats_import.py)
