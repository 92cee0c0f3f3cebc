"""Submitting an SPRT schedule pair by pair, stopping as soon as the test decides.

The schedule (referee/schedule.py) lists up to `max_pairs` game pairs. At most `in_flight`
pairs are on the bus at once; each is submitted and collected by `submit_and_collect`
(its own collector, so every record is checked against its spec as in any run). After each
pair is recorded the test is updated (referee/sprt.py) and `on_status` called. Once it accepts
H0 or H1, no further pair is submitted; the pairs already in flight finish and are recorded
(and counted, as fastchess does), so no match is left half played and no record lost.

Limits: a pair with a failed match (no record), or a record without a result, is kept in the
run folder but not scored. With `in_flight` pairs in flight the test can overshoot its bound by
up to that many pairs' worth of evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS

from bus.protocol import MatchRecord, MatchSpec
from bus.subjects import Subjects
from referee.collector import DEFAULT_IDLE_S, Collector, submit_and_collect
from referee.config import TournamentConfig
from referee.sprt import SprtStatus, pair_score, status, status_of_records


@dataclass
class SprtResult:
    records: list[MatchRecord]
    status: SprtStatus
    submitted: int  # matches put on the bus (2 per pair)
    failed: dict[str, str] = field(default_factory=dict)
    rejected: int = 0  # ended events that were no valid record of their spec


async def run_sprt(
    nc: NATS,
    specs: list[MatchSpec],
    subjects: Subjects,
    on_record: Callable[[MatchRecord], None],
    config: TournamentConfig,
    *,
    on_status: Callable[[SprtStatus], None] | None = None,
    stall_warning: Callable[[], None] | None = None,
    deadline_s: float | None = None,
    idle_s: float | None = DEFAULT_IDLE_S,
    stop: asyncio.Event | None = None,
    prior: dict[str, MatchRecord] | None = None,
) -> SprtResult:
    """`specs` is the whole schedule; `prior` the records a resumed run already has (by match id):
    their pairs count from the start and only the missing matches are played."""
    cfg = config.sprt_config
    tested, baseline = list(config.agents)
    in_flight = cfg.in_flight or max(1, config.concurrency // 2)
    pairs = [specs[i : i + 2] for i in range(0, len(specs), 2)]
    scores: list[float] = []
    recorded: dict[str, MatchRecord] = dict(prior or {})
    failed: dict[str, str] = {}
    rejected = 0
    for pair in pairs:
        if all(s.match_id in recorded for s in pair):
            score = pair_score([recorded[s.match_id] for s in pair], tested)
            if score is not None:
                scores.append(score)
    current = status(cfg, tested, baseline, scores)
    decided = asyncio.Event()
    if current.decision != "continue":
        decided.set()
    slots = asyncio.Semaphore(in_flight)
    t0 = time.monotonic()

    async def play(k: int, pair: list[MatchSpec]) -> None:
        nonlocal current, rejected
        missing = [s for s in pair if s.match_id not in recorded]
        try:
            collector = Collector(missing, on_record)
            left = None if deadline_s is None else max(deadline_s - (time.monotonic() - t0), 1.0)
            recs = await submit_and_collect(
                nc,
                missing,
                subjects,
                on_record,
                stall_warning=stall_warning if k == 0 else None,
                deadline_s=left,
                idle_s=idle_s,
                collector=collector,
                stop=stop,
            )
        finally:
            slots.release()
        failed.update(collector.failed)
        rejected += collector.rejected
        recorded.update({r.match_id: r for r in recs})
        score = pair_score([recorded[s.match_id] for s in pair if s.match_id in recorded], tested)
        if score is not None:
            scores.append(score)
            current = status(cfg, tested, baseline, scores)
            if on_status is not None:
                on_status(current)
            if current.decision != "continue":
                decided.set()

    tasks: list[asyncio.Task[None]] = []
    submitted = 0
    try:
        for k, pair in enumerate(pairs):
            if all(s.match_id in recorded for s in pair):
                continue  # recorded by the run this one resumes
            await slots.acquire()
            if decided.is_set() or (stop is not None and stop.is_set()):
                slots.release()
                break
            errors = [e for t in tasks if t.done() and (e := t.exception()) is not None]
            if errors:
                slots.release()
                raise errors[0]
            submitted += sum(s.match_id not in recorded for s in pair)
            tasks.append(asyncio.create_task(play(k, pair)))
        # Decided (or out of pairs): the pairs in flight finish and are recorded.
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
    records = [recorded[s.match_id] for s in specs if s.match_id in recorded]
    return SprtResult(records=records, status=current, submitted=submitted, failed=failed, rejected=rejected)


def sprt_status(config: TournamentConfig, records: list[MatchRecord]) -> SprtStatus | None:
    """The test over these records; None unless format sprt."""
    if config.format != "sprt":
        return None
    tested, baseline = list(config.agents)
    return status_of_records(config.sprt_config, tested, baseline, records)


def sprt_summary(config: TournamentConfig, records: list[MatchRecord]) -> dict[str, object]:
    """`{"sprt": the test over these records}` for summary.json; empty unless format sprt."""
    st = sprt_status(config, records)
    return {} if st is None else {"sprt": st.model_dump()}


class SprtCollect:
    """`submit_and_collect` for format sprt: the same call, played by `run_sprt`; failed and
    rejected matches are added to the caller's collector. A resumed run passes its whole
    `schedule` and the records it already has (`prior`): pairs stay aligned with the schedule and
    the test starts from the pairs recorded before (the `specs` of the call are then ignored)."""

    def __init__(
        self,
        config: TournamentConfig,
        on_status: Callable[[SprtStatus], None] | None = None,
        *,
        schedule: list[MatchSpec] | None = None,
        prior: list[MatchRecord] | None = None,
    ) -> None:
        self.config = config
        self.on_status = on_status
        self.schedule = schedule
        self.prior = {r.match_id: r for r in prior or []}
        self.result: SprtResult | None = None

    async def __call__(
        self,
        nc: NATS,
        specs: list[MatchSpec],
        subjects: Subjects,
        on_record: Callable[[MatchRecord], None],
        *,
        stall_warning: Callable[[], None] | None = None,
        deadline_s: float | None = None,
        idle_s: float | None = DEFAULT_IDLE_S,
        collector: Collector | None = None,
        stop: asyncio.Event | None = None,
    ) -> list[MatchRecord]:
        self.result = await run_sprt(
            nc,
            self.schedule or specs,
            subjects,
            on_record,
            self.config,
            on_status=self.on_status,
            stall_warning=stall_warning,
            deadline_s=deadline_s,
            idle_s=idle_s,
            stop=stop,
            prior=self.prior,
        )
        if collector is not None:
            collector.failed.update(self.result.failed)
            collector.rejected += self.result.rejected
        return self.result.records
