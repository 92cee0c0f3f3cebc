"""What spectators and operators see: Prometheus metrics (`observability.metrics`) and the live
match page with its feed of `SPIELBUS_MATCHES` (`observability.web`). Depends on `bus` and on
`referee` (standings and ratings); the authority itself never imports it."""

import bus  # noqa: F401  first: nats.py without aiohttp (bus/nats_import.py)
