"""The `spielbus` command and the supervision of the processes it starts.

`spielbus.cli` is the whole product's command line; `spielbus.run` plays a tournament on one
machine (embedded nats-server, agent and LLM-server child processes, referee workers);
`spielbus.launch` and `spielbus.llm_launch` start and stop those children; `spielbus.report`
prints standings and ratings. This package may import every other one; none imports it.
"""

import bus  # noqa: F401  first: nats.py without aiohttp (bus/nats_import.py)
