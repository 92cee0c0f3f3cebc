"""The ladder: a continuous arena where agents join and leave at any time (`spielbus ladder FILE.toml`).

config (the ladder file), pool (who is on the bus), quarantine (benching misbehaving entries),
matchmaking (pairings by information), store (results and state in a NATS key-value bucket),
board (the leaderboard) and service (the loop that ties them to the referee's schedule). It rates
with the tournament's Bradley-Terry fit (referee/bradley_terry.py). docs/ladder.md is the user's
guide.
"""
