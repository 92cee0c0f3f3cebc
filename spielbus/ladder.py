"""`spielbus ladder standings`: the ladder's table from the results stored in JetStream.

Reads every result of the ladder's key-value bucket (referee/ladder_store.py; no ladder process
needed, only NATS), rates them with Bradley-Terry and its 95% profile-likelihood intervals
(referee/ratings.py) and prints entry, games played, rating and interval. Exit 2 when NATS cannot
be reached.

Limits: part of issue 31's ladder; `spielbus ladder FILE.toml` (the long-running service) is not
built yet, so this reads what was recorded into the bucket by other means (tests, tools).
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from bus.auth import load_auth
from bus.connect import connect
from referee.config import RatingsConfig
from referee.ladder_store import BUCKET, LadderResult, LadderStore
from referee.ratings import Rating, _Pair, ratings_from_pairs


def table(results: list[LadderResult]) -> list[tuple[Rating, int]]:
    """Each entry's rating and games played, best first."""
    games: Counter[str] = Counter()
    pairs = []
    for i, r in enumerate(results):
        games.update((r.first, r.second))
        pairs.append(_Pair(r.first, r.second, r.score, game="", match=i))
    rated = ratings_from_pairs(pairs, sorted(games), RatingsConfig())
    return sorted(((x, games[x.agent]) for x in rated), key=lambda t: -t[0].bt)


async def _read(url: str | None, auth: str | None, bucket: str) -> list[LadderResult]:
    login = load_auth(auth).referee() if auth else None
    nc = await connect(
        url,
        name="spielbus-ladder-standings",
        user=login.user if login else None,
        password=login.password if login else None,
    )
    try:
        return await (await LadderStore.open(nc.jetstream(), bucket)).results()
    finally:
        await nc.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spielbus ladder", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    st = sub.add_parser("standings", help="the ladder's table from the results stored in JetStream")
    st.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL)")
    st.add_argument("--auth", default=None, metavar="DIR", help="log in as the referee of this auth folder")
    st.add_argument("--bucket", default=BUCKET, help=f"key-value bucket (default {BUCKET})")
    args = p.parse_args(argv)
    try:
        results = asyncio.run(_read(args.nats, args.auth, args.bucket))
    except (ConnectionError, OSError) as exc:
        print(f"spielbus ladder: {exc}")
        return 2
    out = Table("entry", "games", "Bradley-Terry", "95% interval")
    for rating, n in table(results):
        out.add_row(rating.agent, str(n), f"{rating.bt:.0f}", f"{rating.bt_low:.0f} .. {rating.bt_high:.0f}")
    Console().print(out)
    return 0
