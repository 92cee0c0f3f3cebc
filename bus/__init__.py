"""The wire: protocol models, subjects, streams, connections. Imports nothing else of ours.

First, nats.py's transport is set to import without the aiohttp only its WebSocket transport needs
(`bus.nats_import`): every package of ours that imports nats.py imports this package first.
"""

from bus import nats_import as _nats_import

_nats_import.install()
