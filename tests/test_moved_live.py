"""`moved` events are live-only: not stored in `SPIELBUS_MATCHES` (the `ended` record is the durable
truth), yet the live page's feed follows them on a plain subscription."""

from __future__ import annotations

import asyncio

import pytest
from nats.js.errors import NotFoundError

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from bus.streams import ensure_streams
from bus.subjects import Subjects
from observability.web.feed import MatchFeed
from referee.match import MatchRunner
from referee.worker import EventPublisher
from tests.helpers import serving, spec, uid


async def test_moves_reach_the_feed_but_not_the_stream(nc) -> None:
    subjects = Subjects()
    js = nc.jetstream()
    await ensure_streams(js, subjects)
    a, b = uid("mv"), uid("mw")
    feed = MatchFeed(replay_events=0)
    await feed.follow(nc)
    match = spec("tic_tac_toe", [a, b])
    try:
        async with (
            serving(nc, RandomStrategy(StrategyOptions(seed=3)), a),
            serving(nc, RandomStrategy(StrategyOptions(seed=4)), b),
        ):
            rec = await MatchRunner(nc, match, publish_event=EventPublisher(nc, subjects)).run()
        # started + every move + ended; the moves only ever went over the plain subscription.
        for _ in range(200):
            if feed.events_seen >= len(rec.moves) + 2:
                break
            await asyncio.sleep(0.05)
        assert feed.events_seen == len(rec.moves) + 2
        assert feed.matches[match.match_id].status == "ended"
        stored = await js.get_last_msg(subjects.matches_stream, subjects.match(match.match_id, "ended"))
        assert stored.data
        with pytest.raises(NotFoundError):
            await js.get_last_msg(subjects.matches_stream, subjects.match(match.match_id, "moved"))
    finally:
        await feed.close()
