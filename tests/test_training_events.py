"""What a training match records and asks (issue 44): a referee worker told not to publish live
`moved` events (training sessions nobody watches live) publishes `started` and `ended` only, and the
`ended` record still holds every move; a provenance cache with a time-to-live asks an agent's
`$SRV.INFO` once within it, and at every match without one."""

from __future__ import annotations

from nats.aio.msg import Msg

from agents.random_agent import FirstLegalStrategy
from bus.connect import flush
from bus.protocol import MatchEvent
from referee.worker import ProvenanceCache, RefereeWorker
from tests.helpers import serving, spec, uid


def _first() -> FirstLegalStrategy:
    return FirstLegalStrategy(FirstLegalStrategy.Options())


async def test_without_moved_events_the_ended_record_still_holds_every_move(nc) -> None:
    a, b = uid("a"), uid("b")
    kinds: dict[bool, list[str]] = {}
    moves: dict[bool, list[tuple[int, int, str]]] = {}
    async with serving(nc, _first(), a), serving(nc, _first(), b):
        for live in (True, False):
            seen: list[MatchEvent] = []
            worker = RefereeWorker(nc, on_event=seen.append, moved_events=live)
            on_bus: list[str] = []

            async def count(msg: Msg, into: list[str] = on_bus) -> None:
                into.append(msg.subject.rsplit(".", 1)[1])

            match = spec("tic_tac_toe", [a, b])
            sub = await nc.subscribe(f"spielbus.match.{match.match_id}.>", cb=count)
            await flush(nc)
            rec = await worker.play(match)
            await flush(nc)
            await sub.unsubscribe()
            kinds[live] = [e.type for e in seen]
            assert [k for k in on_bus if k != "moved"] == ["started", "ended"]
            assert ("moved" in on_bus) is live
            moves[live] = [(m.player, m.action, m.text) for m in rec.moves]
    assert kinds[False] == ["started", "ended"]
    assert kinds[True].count("moved") == len(moves[True]) == 7  # x wins on the diagonal
    assert moves[False] == moves[True]


async def test_a_provenance_ttl_asks_once_within_it(nc) -> None:
    name = uid("p")
    asked: list[str] = []

    async def count(msg: Msg) -> None:
        asked.append(msg.subject)

    async with serving(nc, _first(), name):
        sub = await nc.subscribe(f"$SRV.INFO.{name}", cb=count)
        await flush(nc)
        fresh, cached = ProvenanceCache(nc), ProvenanceCache(nc, ttl_s=3600)
        for cache in (fresh, fresh, cached, cached, cached):
            prov = await cache.get(name)
            assert prov.kind == "first"
        await flush(nc)
        await sub.unsubscribe()
    assert len(asked) == 3  # two without a ttl, one for the three asked within it


async def test_on_final_hands_the_record_over_before_its_store_is_acknowledged(nc) -> None:
    # `RefereeWorker.play(on_final=...)`: the final record once its `ended` bytes are written, before
    # JetStream's ack (a training session reports the episode's end meanwhile); the same record is
    # returned and stored.
    a, b = uid("a"), uid("b")
    order: list[str] = []
    handed: list[object] = []
    async with serving(nc, _first(), a), serving(nc, _first(), b):
        worker = RefereeWorker(nc)
        real = worker.publisher.send

        async def send(event: MatchEvent, data: bytes) -> None:
            if event.type == "ended":
                order.append("store")
                await real(event, data)
                order.append("acked")
            else:
                await real(event, data)

        worker.publisher.send = send  # type: ignore[method-assign]

        def final(record: object) -> None:
            order.append("final")
            handed.append(record)

        match = spec("tic_tac_toe", [a, b])
        rec = await worker.play(match, on_final=final)
        subject = f"spielbus.match.{match.match_id}.ended"
        stored = await nc.jetstream().get_last_msg("SPIELBUS_MATCHES", subject)
    assert order == ["final", "store", "acked"]
    assert handed == [rec]
    assert MatchEvent.model_validate_json(stored.data).record == rec
