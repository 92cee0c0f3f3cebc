"""The Gymnasium environment over the bus (spielbus.env.BusEnv), against real agents on a real
nats-server: Gymnasium's own checker, rewards, the record marked `training`, tensors for imperfect
information, and every kind of bad input or odd moment with its documented outcome."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from nats.aio.client import Client as NATS

from bus.auth import read_login_file
from bus.protocol import MatchEvent
from spielbus.env import BusEnv, EnvError, TrainingSession
from tests.env_helpers import Stall, ThreadAgent, config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ttt(nats_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainingSession]:
    run_dir = tmp_path_factory.mktemp("env-runs")
    with TrainingSession(config(run_dir=run_dir), nats_url=nats_url, learner="learner-ttt") as s:
        yield s


def _play_out(env: BusEnv, info: dict) -> tuple[float, dict]:
    while True:
        _, reward, term, trunc, info = env.step(min(info["legal"]))
        if term or trunc:
            return float(reward), info


def test_gymnasium_check_env_passes(ttt: TrainingSession) -> None:
    env = BusEnv(session=ttt)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()
    assert ttt.alive()  # a shared session outlives its environments


def test_a_match_is_refereed_recorded_and_marked_training(ttt: TrainingSession) -> None:
    env = BusEnv(session=ttt, seat=1)
    obs, info = env.reset(seed=5)
    assert obs["action_mask"].sum() == 8  # the opponent (seat 0) has moved already
    assert obs["observation"].shape == env.views.observation_space["observation"].shape
    assert info["seat"] == 1 and isinstance(info["text"], str) and len(info["legal"]) == 8
    match_id = env.match_id
    reward, end = _play_out(env, info)
    assert end["outcome"] in ("decisive", "draw") and reward == end["returns"][1]
    records = [json.loads(line) for line in (ttt.folder.matches).read_text().splitlines()]
    mine = [r for r in records if r["match_id"] == match_id]
    assert len(mine) == 1 and mine[0]["training"] is True and mine[0]["seats"] == ["rand", "learner-ttt"]
    env.close()


def test_a_training_match_sends_no_live_moves_and_its_record_holds_every_move(ttt: TrainingSession) -> None:
    # No live page or metrics: no `moved` events (issue 44; docs/env.md), but the stored record
    # holds every move, the learner's and the opponent's, and replays to the end of the game.
    assert ttt.worker is not None and ttt.worker.moved_events is False
    env = BusEnv(session=ttt, seat=0)
    _, info = env.reset(seed=11)
    match_id = env.match_id
    steps = 1
    while True:
        _, _, term, trunc, end = env.step(min(info["legal"]))
        if term or trunc:
            break
        info, steps = end, steps + 1
    env.close()
    records = [json.loads(line) for line in ttt.folder.matches.read_text().splitlines()]
    (rec,) = [r for r in records if r["match_id"] == match_id]
    learner = [m for m in rec["moves"] if m["agent"] == "learner-ttt"]
    assert len(learner) == steps and len(rec["moves"]) in (2 * steps - 1, 2 * steps)
    state = ttt.game.new_initial_state()
    for m in rec["moves"]:
        assert state.action_to_string(state.current_player(), m["action"]) == m["text"]
        state.apply_action(m["action"])
    assert state.is_terminal() and rec["outcome"] == end["outcome"]


def test_the_session_runs_on_uvloop_and_its_latencies_are_not_whole_milliseconds(
    ttt: TrainingSession,
) -> None:
    # bus/loop.py: the session's loop is uvloop's, whose clock counts whole milliseconds; a move's
    # latency is taken with perf_counter, so the records' latencies keep their fractions (read off
    # the loop's clock, every one of them came out a whole number of milliseconds).
    assert type(ttt._loop).__module__.startswith("uvloop")
    env = BusEnv(session=ttt, seat=0)
    ids = []
    for seed in range(3):
        _, info = env.reset(seed=100 + seed)
        ids.append(env.match_id)
        _play_out(env, info)
    env.close()
    records = [json.loads(line) for line in ttt.folder.matches.read_text().splitlines()]
    latencies = [m["latency_ms"] for r in records if r["match_id"] in ids for m in r["moves"]]
    assert len(latencies) >= 9
    assert any(lat != round(lat) for lat in latencies), latencies


def test_out_of_range_actions_are_refused_before_anything_is_sent(ttt: TrainingSession) -> None:
    env = BusEnv(session=ttt)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    _, info = env.reset(seed=1)
    for bad in (9, -1, 2.0, True, "3", np.array([1, 2])):
        with pytest.raises(ValueError):
            env.step(bad)
    # The decision is still pending: a good action plays on (a NumPy integer is fine).
    _, _, term, _, info = env.step(np.int32(4))
    assert not term
    _play_out(env, info)
    with pytest.raises(RuntimeError, match="after the end"):
        env.step(0)
    env.close()


def test_reset_while_live_abandons_the_match_which_still_ends_with_a_record(ttt: TrainingSession) -> None:
    env = BusEnv(session=ttt)
    env.reset(seed=2)
    first = env.match_id
    _, info = env.reset(seed=3)
    assert info["abandoned"] == first and env.match_id != first
    records = {
        json.loads(line)["match_id"]: json.loads(line) for line in ttt.folder.matches.read_text().splitlines()
    }
    rec = records[first]
    assert rec["outcome"] == "forfeit" and rec["forfeited"] == [0]
    assert [f["reason"] for f in rec["faults"]] == ["error"] and "abandoned" in rec["faults"][0]["detail"]
    env.close()


def test_an_illegal_action_follows_the_forfeit_policy_and_says_so(ttt: TrainingSession) -> None:
    env = BusEnv(session=ttt)
    _, info = env.reset(seed=4)
    env.step(4)  # the centre
    obs, reward, term, _, info = env.step(4)  # taken: legal range, illegal now
    assert term and reward == -1.0
    assert info["illegal"] is True and info["fault_policy"] == "forfeit" and info["outcome"] == "forfeit"
    assert [f["reason"] for f in info["faults"]] == ["illegal"]
    assert obs["action_mask"].sum() == 0
    env.close()


def test_under_the_retry_policy_an_illegal_action_is_asked_again(nats_url: str, tmp_path: Path) -> None:
    cfg = config(policy="retry", run_dir=tmp_path)
    with BusEnv(cfg, nats_url=nats_url, learner="learner-retry") as env:
        env.reset(seed=4)
        env.step(4)
        _, reward, term, _, info = env.step(4)
        assert reward == 0.0
        assert not term and info["illegal"] is True and info["fault_policy"] == "retry"
        assert info["retry"].startswith("illegal") and 4 not in info["legal"]
        _, end = _play_out(env, info)
        assert [f["reason"] for f in end["faults"]] == ["illegal"]


def test_kuhn_poker_observes_information_state_tensors_and_the_payoff(nats_url: str, tmp_path: Path) -> None:
    cfg = config("kuhn_poker", run_dir=tmp_path)
    with BusEnv(cfg, nats_url=nats_url, learner="learner-kuhn", seat=None) as env:
        assert env.views.observation_space["observation"].shape == (11,)  # Kuhn's information state
        total = 0.0
        for episode in range(6):
            obs, info = env.reset(seed=episode)
            seat = info["seat"]
            assert obs["observation"][seat] == 1.0  # the tensor's player bit is this seat's
            # Hidden information: one card bit set, the seat's own; the opponent's card is not there.
            assert obs["observation"][2:5].sum() == 1.0
            reward, end = _play_out(env, info)
            assert reward == end["returns"][seat] and reward in (-2.0, -1.0, 1.0, 2.0)
            total += reward
        records = env.session.folder.matches.read_text().splitlines()
        assert len(records) == 6 and all(json.loads(r)["training"] for r in records)


def test_an_opponent_that_stalls_times_out_and_forfeits(nats_url: str, tmp_path: Path) -> None:
    slow = ThreadAgent(nats_url, "stalls", Stall(Stall.Options()))
    try:
        cfg = config(
            agents='[agents.stalls]\nkind = "random"\nexternal = true\n', deadline_ms=3000, run_dir=tmp_path
        )
        with BusEnv(cfg, nats_url=nats_url, learner="learner-stall") as env:
            _, info = env.reset(seed=1)
            _, reward, term, _, info = env.step(0)
            assert term and reward == 1.0 and info["outcome"] == "forfeit" and not info["forfeited"]
            rec = json.loads(env.session.folder.matches.read_text().splitlines()[0])
            assert [(f["agent"], f["reason"]) for f in rec["faults"]] == [("stalls", "timeout")]
    finally:
        slow.stop()


def test_an_opponent_that_disconnects_forfeits_and_nothing_is_left_running(
    nats_url: str, tmp_path: Path
) -> None:
    gone = ThreadAgent(nats_url, "leaves")
    try:
        # A 5-second deadline: the gone opponent's turn is asked again until it, then waited for up to
        # the 1-second absence limit (the test's time, where the default 30 s made it a minute).
        cfg = config(
            agents='[agents.leaves]\nkind = "random"\nexternal = true\n', deadline_ms=5_000, run_dir=tmp_path
        )
        env = BusEnv(cfg, nats_url=nats_url, learner="learner-gone", absent_limit_s=1.0)
        _, info = env.reset(seed=1)
        gone.disconnect()
        _, reward, term, _, info = env.step(0)
        assert term and reward == 1.0 and info["outcome"] == "forfeit"
        rec = json.loads(env.session.folder.matches.read_text().splitlines()[0])
        assert [(f["agent"], f["reason"]) for f in rec["faults"]] == [("leaves", "no_responder")]
        session = env.session
        env.close()
        assert not session._thread.is_alive() and not session.alive()
        assert (session.folder.path / "standings.json").exists()
        with pytest.raises(Exception, match="closed"):
            env.reset()
    finally:
        gone.stop()


def test_closing_stops_the_opponents_it_started(nats_url: str, tmp_path: Path) -> None:
    env = BusEnv(config(run_dir=tmp_path), nats_url=nats_url, learner="learner-close")
    env.reset(seed=1)  # a live match: closing abandons it
    procs = list(env.session._processes)
    assert procs and all(p.alive() for p in procs)
    env.close()
    assert not any(p.alive() for p in procs)
    rec = json.loads(env.session.folder.matches.read_text().splitlines()[0])
    assert rec["outcome"] == "forfeit" and rec["training"] is True


def test_training_matches_show_on_the_live_page_and_in_the_metrics(nats_url: str, tmp_path: Path) -> None:
    import urllib.request

    from bus.process import free_port

    web, metrics = free_port(), free_port()
    with BusEnv(
        config(run_dir=tmp_path),
        nats_url=nats_url,
        learner="learner-seen",
        web_port=web,
        metrics_port=metrics,
    ) as env:
        _, info = env.reset(seed=1)
        _play_out(env, info)
        match_id = env.match_id

        def get(url: str) -> str:
            with urllib.request.urlopen(url, timeout=10) as resp:
                return str(resp.read().decode())

        # The page follows the match stream: the `ended` event reaches it shortly after the record.
        for _ in range(120):
            listed = json.loads(get(f"http://127.0.0.1:{web}/api/matches"))
            mine = [m for m in listed["matches"] if m["match_id"] == match_id and m["status"] == "ended"]
            if mine:
                break
            time.sleep(0.25)
        assert mine and mine[0]["training"] is True and mine[0]["tournament"].startswith("train-envtest-")
        text = get(f"http://127.0.0.1:{metrics}/metrics")
        assert any(
            line.startswith("spielbus_matches_total{") and 'game="tic_tac_toe"' in line
            for line in text.splitlines()
        )


def test_an_external_opponent_that_is_not_there_is_a_clear_error(nats_url: str, tmp_path: Path) -> None:
    import threading

    def loops() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "spielbus-env")

    before = loops()
    cfg = config(agents='[agents.nobody]\nkind = "random"\nexternal = true\n', run_dir=tmp_path)
    with pytest.raises(EnvError, match="nobody"):
        BusEnv(cfg, nats_url=nats_url, learner="learner-alone", agent_wait_s=1.0)
    assert loops() == before  # the failed session's loop thread has stopped


def test_under_the_random_policy_the_referee_plays_for_an_illegal_action(
    nats_url: str, tmp_path: Path
) -> None:
    cfg = config(policy="random", run_dir=tmp_path)
    with BusEnv(cfg, nats_url=nats_url, learner="learner-random") as env:
        env.reset(seed=4)
        env.step(4)
        _, _, term, _, info = env.step(4)  # taken: the referee plays a random legal move instead
        assert info["illegal"] is True and info["fault_policy"] == "random"
        if not term:
            _, end = _play_out(env, info)
        else:
            end = info
        assert end["outcome"] != "forfeit" and [f["reason"] for f in end["faults"]] == ["illegal"]
        assert env.record is not None
        forced = [m for m in env.record.moves if m.forced]
        assert len(forced) == 1 and forced[0].agent == "learner-random" and forced[0].action != 4


def test_a_game_that_pays_along_the_way_gives_per_step_rewards(nats_url: str, tmp_path: Path) -> None:
    # Cliff walking (one seat, OpenSpiel's REWARDS model): -1 a step, -100 and the end for the cliff.
    with BusEnv(config("cliff_walking", run_dir=tmp_path), nats_url=nats_url, learner="learner-cliff") as env:
        env.reset(seed=1)
        rewards = []
        for action in [1, 0, 0, 0, 0, 0, 0, 0, 3]:  # up, along the cliff's edge, down to the goal
            _, reward, term, _, info = env.step(action)
            rewards.append(float(reward))
        assert term and rewards == [-1.0] * 9 and sum(rewards) == info["returns"][0]
        env.reset(seed=2)
        _, reward, term, _, info = env.step(0)  # right, into the cliff
        assert term and reward == -100.0 == info["returns"][0]


class _Spy:
    """A connection of its own loop in a thread that keeps everything it is let hear on `>` and on
    the learner's turn subject; None-like (`refused`) when the server turns the login away."""

    def __init__(self, url: str, login: dict[str, str], learner: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.heard: set[tuple[str, bytes]] = set()  # each once, however many subscriptions matched
        self.nc: NATS | None = None
        self.refused = ""
        try:
            self._call(self._start(url, login, learner))
        except Exception as exc:  # the server refused the connection: what a spy must get
            self.refused = f"{type(exc).__name__}: {exc}"

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _start(self, url: str, login: dict[str, str], learner: str) -> None:
        self.nc = await nats.connect(url, allow_reconnect=False, connect_timeout=5, **login)

        async def keep(msg) -> None:
            self.heard.add((msg.subject, msg.data))

        for subject in (">", f"spielbus.turn.{learner}", "spielbus.turn.>", "_INBOX.>"):
            await self.nc.subscribe(subject, cb=keep)
        await self.nc.flush()

    def settle(self) -> set[tuple[str, bytes]]:
        """Everything the server sent before this call, handled: a drain unsubscribes, waits for
        the server's PONG (so every earlier message is in), then for each subscription's queue to
        empty. Reading `heard` without it races the spy's thread, which on a loaded machine may
        not have run at all yet (a CI run once read an empty set after a whole episode)."""
        if self.nc is not None and not self.nc.is_closed:
            self._call(self.nc.drain())
        return set(self.heard)

    def stop(self) -> None:
        if self.nc is not None and not self.nc.is_closed:
            with contextlib.suppress(Exception):
                self._call(self.nc.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_nobody_without_the_learners_login_hears_its_private_kuhn_turns(tmp_path: Path) -> None:
    """The embedded server of a training session runs with accounts (issue 40): a process with no
    login, and an opponent with its own login, hear none of the learner's private turns."""
    cfg = config("kuhn_poker", run_dir=tmp_path)
    with BusEnv(cfg, learner="learner-spied", seat=None) as env:
        session = env.session
        spies = {"no login": _Spy(session.url, {}, session.learner)}
        auth_dir = getattr(session, "auth_dir", None)  # absent before issue 40
        if auth_dir is not None:
            rand = read_login_file(auth_dir / "agents" / "rand.env")
            login = {"user": rand["NATS_USER"], "password": rand["NATS_PASSWORD"]}
            spies["the opponent's login"] = _Spy(session.url, login, session.learner)
        try:
            turns = 0
            for episode in range(8):
                _, info = env.reset(seed=episode)
                turns += 1
                while True:
                    _, _, term, trunc, info = env.step(min(info["legal"]))
                    if term or trunc:
                        break
                    turns += 1
            assert turns >= 8
            for who, spy in spies.items():
                learner_turns = [d for s, d in spy.settle() if s == f"spielbus.turn.{session.learner}"]
                assert learner_turns == [], f"{who} heard {len(learner_turns)} of {turns} learner turns"
            assert spies["no login"].refused, "a process without a login was let onto the bus"
            assert auth_dir is not None and (auth_dir / "auth.json").stat().st_mode & 0o077 == 0
        finally:
            for spy in spies.values():
                spy.stop()


def test_the_learners_turns_never_cross_the_bus(nats_url: str, tmp_path: Path) -> None:
    """Issue 44: the referee runs in the environment's process, so it asks the learning seat there
    (spielbus.env.bridge.LocalLearner), not through nats-server; the opponent is still asked on the
    bus. A listener on the open bus hears the opponent's turns and notifications and none of the
    learner's, and the
    record still holds each learner move with its latency."""
    cfg = config(run_dir=tmp_path)
    with BusEnv(cfg, nats_url=nats_url, learner="learner-local", seat=0) as env:
        spy = _Spy(nats_url, {}, "learner-local")
        try:
            _, info = env.reset(seed=3)
            match_id = env.match_id
            _play_out(env, info)
            heard = [s for s, _ in spy.settle()]
        finally:
            spy.stop()
        (rec,) = [r for r in env.session.folder.read_records() if r.match_id == match_id]
    assert "spielbus.turn.rand" in heard and "spielbus.notify.rand" in heard  # the spy hears the bus
    assert "spielbus.turn.learner-local" not in heard
    assert "spielbus.notify.learner-local" not in heard
    learner = [m for m in rec.moves if m.agent == "learner-local"]
    assert learner and all(m.latency_ms is not None and m.latency_ms >= 0 for m in learner)


def _stored_ended(nats_url: str, match_id: str) -> dict | None:
    """The `ended` record the matches stream holds for `match_id` (None if it holds none)."""

    async def read() -> dict | None:
        nc = await nats.connect(nats_url)
        try:
            msg = await nc.jetstream().get_last_msg("SPIELBUS_MATCHES", f"spielbus.match.{match_id}.ended")
        except nats.js.errors.NotFoundError:
            return None
        finally:
            await nc.close()
        return json.loads(msg.data or b"{}")["record"]

    return asyncio.run(read())


def _slowed_store(session: TrainingSession, *, fail_first: bool = False, delay_s: float = 0.0) -> list[str]:
    """Make the session's `ended` stores wait `delay_s` (and the first one fail): what a slow or
    briefly unreachable JetStream does. Returns the list of outcomes, one per store tried."""
    assert session.worker is not None
    publisher = session.worker.publisher
    real = publisher.send
    tried: list[str] = []

    async def send(event: MatchEvent, data: bytes) -> None:
        if event.type == "ended":
            await asyncio.sleep(delay_s)
            if fail_first and not tried:
                tried.append("failed")
                raise nats.errors.TimeoutError
            tried.append("stored")
        await real(event, data)

    publisher.send = send  # type: ignore[method-assign]
    return tried


def test_an_episode_ends_before_its_record_is_stored_and_close_waits_for_the_store(
    nats_url: str, tmp_path: Path
) -> None:
    # The caller gets the end of an episode once the record is in the run folder, while JetStream
    # stores it; closing at once must still leave it stored (close() lets the store finish rather
    # than cancel it).
    env = BusEnv(config(run_dir=tmp_path), nats_url=nats_url, learner="learner-slowstore", seat=0)
    tried = _slowed_store(env.session, delay_s=1.0)
    _, info = env.reset(seed=3)
    match_id = env.match_id
    assert match_id is not None
    _, end = _play_out(env, info)
    assert tried == []  # reported ended while its store still waited
    (rec,) = [json.loads(line) for line in env.session.folder.matches.read_text().splitlines()]
    assert rec["match_id"] == match_id and rec["outcome"] == end["outcome"]
    env.close()
    assert tried == ["stored"]
    stored = _stored_ended(nats_url, match_id)
    assert stored is not None and stored["attempt"] == 1
    played = [(m["turn"], m["action"]) for m in rec["moves"]]
    assert [(m["turn"], m["action"]) for m in stored["moves"]] == played


def test_a_record_whose_store_fails_after_the_episode_ended_is_stored_again_not_replayed(
    nats_url: str, tmp_path: Path
) -> None:
    # Before the caller was handed the end early, a failed store replayed the whole match; now the
    # caller has seen it end, so the same record is stored again and the match is played once.
    env = BusEnv(config(run_dir=tmp_path), nats_url=nats_url, learner="learner-storeagain", seat=0)
    tried = _slowed_store(env.session, fail_first=True)
    _, info = env.reset(seed=4)
    match_id = env.match_id
    assert match_id is not None
    _, end = _play_out(env, info)
    assert end["outcome"] in ("decisive", "draw")
    _, info = env.reset(seed=5)  # the session goes on
    env.close()
    assert tried[:2] == ["failed", "stored"]
    stored = _stored_ended(nats_url, match_id)
    assert stored is not None and stored["attempt"] == 1 and stored["outcome"] == end["outcome"]
    records = [json.loads(line) for line in env.session.folder.matches.read_text().splitlines()]
    assert [r["attempt"] for r in records if r["match_id"] == match_id] == [1]
