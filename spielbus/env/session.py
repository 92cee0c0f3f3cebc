"""The bus side of the training environments: a NATS connection, the referee, the opponents and the
learning seats' agent, on an asyncio loop in a background thread, so `reset()`/`step()` stay synchronous.

One `TrainingSession` serves any number of environments (a vector environment shares one). It
starts, in order: the embedded nats-server (unless `nats_url` or `NATS_URL` names one), the opponent
agents of the tournament file's `[agents]` that are not `external` (child processes, exactly as
`spielbus run` starts them; external ones must already be on the bus), the live page and metrics when
ports are given, and `learner`: an agent service (`agents.runtime.AgentService`, registered, so its
provenance is an agent's) whose strategy hands each turn to the environment's
caller (`spielbus.env.bridge`); the referee, in this process too, asks it here, not over the bus
(`LocalLearner`). Matches are played by
the referee's own code (`RefereeWorker.play`: the path every `spielbus run` match takes after the
work queue), so legality, chance, hidden information, clocks and the fault policy stay the referee's,
and every match is stored in `SPIELBUS_MATCHES` and appended to a run folder
(`<run_dir>/train-<name>-<time>-<hex>/matches.jsonl`), its record marked `training: true`. The
caller is handed a match's end once its record is in the folder, while JetStream stores it
(`RefereeWorker.play`'s `on_final`); a store that fails then is tried again, not the match.
`close()` lets those stores finish, writes the folder's standings and ratings and stops everything
it started. The embedded server runs on one Go processor (`EmbeddedNats(cpus=1)`, measured in
docs/performance.md).

Accounts, as in a tournament (bus/auth.py): the embedded server runs with an auth folder written
into the run folder (`<run folder>/auth`) holding the referee, the learner and every agent of the
file, each in its own account; the referee and the learner connect from this process as their own
users (two connections), each opponent child as its own. A process without a login cannot connect,
and no opponent's login can hear the learner's turns. An `external` opponent's login file (with the
server's URL) is written to `<run folder>/auth/agents/<name>.env` (`login_file(name)`). With
`nats_url` the server is the operator's: `auth_dir` (an `auth init` folder naming the learner too)
logs every party in as its user; without it the session connects without a login, as on any open bus.

Limits: the referee runs in this process (not a separate `spielbus referee` worker pool): the
environment is one user's training run, not a shared tournament. A match aborted by the bus is
replayed up to `MAX_ATTEMPTS` times, then the episode fails with `EnvError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from nats.aio.client import Client as NATS

from agents.runtime import AgentService
from bus import loop as bus_loop
from bus.auth import config_path, ensure_auth, login_for, user_env
from bus.connect import Login, connect
from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects, check_token
from games.loader import load_game
from observability.web.serve import Observability, start_observability
from referee.config import TournamentConfig, load_config
from referee.match import MatchAborted
from referee.run_folder import RunFolder, summarize, tournament_id
from referee.worker import RefereeWorker
from spielbus.bot_logins import AUTH_SUBDIR, write_bot_login
from spielbus.env.bridge import Abandoned, BridgeStrategy, EnvError, Episode, LocalLearner
from spielbus.launch import AgentProcess, stop_all, wait_for_agents

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_ATTEMPTS = 3
# How long `close()` and an abandoned episode wait for the referee to finish a match.
END_WAIT_S = 60.0
# How long `close()` lets matches already reported ended store their records.
STORE_WAIT_S = 30.0
# How long an agent's provenance (`$SRV.INFO`) is used before the referee asks again.
PROVENANCE_TTL_S = 10.0


class _QuietAbandoned(logging.Filter):
    """The agent runtime logs every refused turn with its traceback; an abandoned match's turns are
    refused on purpose (`spielbus.env.bridge`), so their tracebacks are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], Abandoned))


logging.getLogger("agents.runtime").addFilter(_QuietAbandoned())


class TrainingSession:
    """Everything on the bus that an environment needs; `close()` (or `with`) stops it all."""

    def __init__(
        self,
        config: TournamentConfig | str | Path,
        *,
        nats_url: str | None = None,
        prefix: str = "spielbus",
        learner: str = "learner",
        run_dir: str | Path | None = None,
        web_port: int | None = None,
        metrics_port: int | None = None,
        agent_wait_s: float = 120.0,
        absent_limit_s: float = 10.0,
        auth_dir: str | Path | None = None,
    ) -> None:
        self.config = config if isinstance(config, TournamentConfig) else load_config(config)
        self.learner = check_token(learner, "learner name")
        if self.learner in self.config.agents:
            raise ValueError(
                f"the learner's name {learner!r} is an agent of the tournament file: pick another"
            )
        self.subjects = Subjects(prefix)
        self.game = load_game(self.config.games[0])
        self.tid = tournament_id(self.config.model_copy(update={"name": f"train-{self.config.name}"}))
        self.folder = RunFolder(run_dir or self.config.run_dir, self.tid)
        self.bridge = BridgeStrategy()
        self._url = nats_url or os.environ.get("NATS_URL") or None
        self.auth_dir = self._auth_dir(auth_dir)
        self._web_port, self._metrics_port = web_port, metrics_port
        self._agent_wait_s, self._absent_limit_s = agent_wait_s, absent_limit_s
        self._embedded: EmbeddedNats | None = None
        self._processes: list[AgentProcess] = []
        self._nc: NATS | None = None
        self._learner_nc: NATS | None = None
        self._service: AgentService | None = None
        self._obs: Observability | None = None
        self.worker: RefereeWorker | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Matches reported ended whose record JetStream is still storing (`_play`).
        self._storing: set[asyncio.Task[Any]] = set()
        self._count = 0
        self._closed = False
        self._loop = bus_loop.new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="spielbus-env", daemon=True)
        self._thread.start()
        try:
            self._call(self._start())
        except BaseException:
            self.close()
            raise

    def _auth_dir(self, given: str | Path | None) -> Path | None:
        """The accounts: the folder given, else (embedded server) one written into the run folder
        for the referee, the learner and every agent of the file; None on an operator's open bus."""
        if given is not None:
            return Path(given)
        if self._url is not None:
            return None
        out = self.folder.path / AUTH_SUBDIR
        ensure_auth([*self.config.agents, self.learner], out, prefix=self.subjects.prefix)
        return out

    def _login(self, agent: str | None = None) -> Login:
        """The referee's login (`agent` None) or agent `agent`'s; none on an open bus."""
        if self.auth_dir is None:
            return {}
        user = login_for(self.auth_dir, "agent" if agent else "referee", agent, prefix=self.subjects.prefix)
        return {"user": user.user, "password": user.password}

    def login_file(self, name: str) -> Path:
        """Agent `name`'s login file, holding the server's URL: what an outside bot connects with
        (`--login FILE`). Only with accounts."""
        if self.auth_dir is None:
            raise EnvError("this session has no accounts (an open bus): connect without a login")
        return Path(self.auth_dir) / "agents" / f"{name}.env"

    # -- the loop thread ----------------------------------------------------------------------

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the session's loop and wait for its result here."""
        if not self._thread.is_alive():
            coro.close()
            raise EnvError("the training session is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise EnvError(f"the bus side did not answer within {timeout} s") from None

    async def _start(self) -> None:
        if self._url is None:
            self._embedded = EmbeddedNats(
                log_file=self.folder.path / "nats-server.log",
                config=config_path(self.auth_dir) if self.auth_dir is not None else None,
                # A session's traffic is a ping-pong of single requests: with a processor per core,
                # Go's scheduler spins between them on the cores the learner and the opponents need.
                cpus=1,
            ).start()
            self._url = self._embedded.url
        self._nc = nc = await connect(self._url, name=f"spielbus-env-{self.tid}", **self._login())
        await ensure_streams(nc.jetstream(), self.subjects)
        self._obs = await start_observability(
            nc,
            self.subjects,
            metrics_port=self._metrics_port,
            web_port=self._web_port,
            fallback=True,
            ratings_config=self.config.ratings,
        )
        for name, acfg in self.config.agents.items():
            if acfg.external:
                if self._embedded is not None and self.auth_dir is not None:
                    path = write_bot_login(self.auth_dir, name, self._url)
                    log.warning("external opponent %s: its login file is %s (private)", name, path)
                continue
            env = user_env(login_for(self.auth_dir, "agent", name)) if self.auth_dir is not None else {}
            for i in range(acfg.replicas):
                self._processes.append(
                    AgentProcess(
                        name,
                        acfg,
                        self._url,
                        self.subjects.prefix,
                        self.folder.path / "logs" / f"{name}-{i}.log",
                        i,
                        options=self.config.agent_options(name),
                        extra_env=env,
                    )
                )
        missing = await wait_for_agents(nc, list(self.config.agents), self._processes, self._agent_wait_s)
        if missing:
            raise EnvError(
                f"agents not on the bus after {self._agent_wait_s:.0f} s: {', '.join(missing)} "
                "(an `external = true` agent must already be serving under its name)"
            )
        # The learner in its own account, on its own connection: as any agent, it hears only its turns.
        self._learner_nc = await connect(
            self._url, name=f"spielbus-env-{self.learner}", **self._login(self.learner)
        )
        self._service = AgentService(self._learner_nc, self.bridge, name=self.learner, subjects=self.subjects)
        await self._service.start()
        # Live `moved` events only for a live page or metrics (they count moves from them): nobody
        # else follows a training match live, and every move is in its stored `ended` record.
        # Provenance asked once per PROVENANCE_TTL_S, not per match (matches last a fraction of a second).
        self.worker = RefereeWorker(
            nc,
            subjects=self.subjects,
            absent_limit_s=self._absent_limit_s,
            provenance_ttl_s=PROVENANCE_TTL_S,
            moved_events=self._web_port is not None or self._metrics_port is not None,
            local_seats={self.learner: LocalLearner(self.bridge)},
        )
        if self._obs.metrics is not None:
            self.worker.publisher.listeners.append(self._obs.metrics.on_event)

    async def _play(self, ep: Episode) -> None:
        assert self.worker is not None
        handed: list[MatchRecord] = []

        def hand_over(record: MatchRecord) -> None:
            # In the run folder, then to the caller, while JetStream stores it (a round trip to
            # the server and a disk write: 0.39 ms of a tic-tac-toe episode's 6.3, docs/performance.md).
            self.folder.append(record)
            handed.append(record)
            task = asyncio.current_task()
            if task is not None:
                self._storing.add(task)
            ep.events.put(("ended", record))

        try:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                try:
                    record = await self.worker.play(ep.spec, attempt, on_final=hand_over)
                    break
                except MatchAborted as exc:
                    if handed:
                        # Played to its end and reported: only the store failed. Store that
                        # record again; a replay would play a match the caller has seen end.
                        record = handed[0]
                        await self._store_again(record, attempt, exc)
                        break
                    log.warning("training match %s attempt %d aborted: %s", ep.spec.match_id, attempt, exc)
            else:
                raise EnvError(f"match {ep.spec.match_id} was aborted {MAX_ATTEMPTS} times by the bus")
            if not handed:
                hand_over(record)
        except BaseException as exc:
            if handed:
                # Reported ended and in the run folder already: nobody reads this episode's queue now.
                log.error("training match %s failed after its end was reported: %r", ep.spec.match_id, exc)
            else:
                ep.events.put(("error", exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.bridge.episodes.pop(ep.spec.match_id, None)
            self._storing.discard(asyncio.current_task())

    async def _store_again(self, record: MatchRecord, attempt: int, failure: MatchAborted) -> None:
        """Publish a reported match's `ended` record again (its `Nats-Msg-Id` keeps one copy in the
        stream) until stored or `MAX_ATTEMPTS` tries have failed; it goes to the run folder anyway."""
        assert self.worker is not None
        event = MatchEvent.ended_of(record, attempt)
        for n in range(MAX_ATTEMPTS):
            log.warning("training match %s: storing its record again: %s", record.match_id, failure)
            await asyncio.sleep(0.5 * 2**n)
            try:
                await self.worker.publisher(event)
                return
            except Exception as exc:
                failure = MatchAborted(f"the ended event was not stored: {exc!r}")
        log.error(
            "training match %s: its record is not in the matches stream (%s); the run folder has it",
            record.match_id,
            failure,
        )

    def _begin(self, ep: Episode) -> None:
        self.bridge.episodes[ep.spec.match_id] = ep
        task = asyncio.create_task(self._play(ep), name=f"train-{ep.spec.match_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- what an environment calls ------------------------------------------------------------

    @property
    def url(self) -> str:
        """The NATS server's URL (the embedded one's, when the session started it): where an
        outside bot connects to join as an opponent (with its `login_file`, under accounts)."""
        assert self._url is not None
        return self._url

    def start_match(self, seats: list[str], secret: str, seed: int, *, tensors: bool = True) -> Episode:
        """Start a match with these seats (the learner's name where a learning seat sits) and
        return its episode at once; the referee plays it on the session's loop. `secret` decides
        chance; `seed` is the match's seed (seeded agents mix it into their choices)."""
        if self._closed:
            raise EnvError("the training session is closed")
        unknown = [s for s in seats if s != self.learner and s not in self.config.agents]
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} not among the tournament file's agents "
                f"({', '.join(self.config.agents)})"
            )
        self._count += 1
        spec = MatchSpec(
            match_id=f"{self.tid}-{self._count:06d}",
            tournament=self.tid,
            game=self.config.games[0],
            seats=seats,
            seed=seed,
            deadline_ms=self.config.deadline_ms,
            policy=self.config.wire_policy(),
            max_turns=self.config.max_turns,
            secret=secret,
            budgets=self.config.seat_budgets(seats),
            training=True,
            tensors=[self.learner] if tensors else None,
        )
        ep = Episode(spec, self._loop)
        if not self._thread.is_alive():
            raise EnvError("the training session is closed")
        # Not waited for: the caller next waits for the episode's first event anyway, and a
        # round trip to the loop thread per episode was one more wake-up of each thread.
        self._loop.call_soon_threadsafe(self._begin, ep)
        return ep

    def abandon(self, ep: Episode, wait_s: float = END_WAIT_S) -> MatchRecord | None:
        """Give up a live episode: every further turn of its learning seats is refused (a service
        error, which the referee records as an `error` fault and treats by the tournament's fault
        policy), then wait for the referee to end the match. Returns its record (None if it failed)."""
        if ep.done:
            return ep.record
        self._loop.call_soon_threadsafe(ep.abandon_in_loop)
        end = time.monotonic() + wait_s
        while not ep.done:
            left = end - time.monotonic()
            if left <= 0:
                raise EnvError(
                    f"match {ep.spec.match_id} did not end within {wait_s:.0f} s of being abandoned"
                )
            with contextlib.suppress(EnvError):
                ep.next_event(min(left, 1.0), alive=self.alive)
        return ep.record

    def alive(self) -> bool:
        return self._thread.is_alive() and not self._closed

    def close(self) -> None:
        """Abandon live episodes, stop the learner, the opponents and the embedded server, and write
        the run folder's standings and ratings. Idempotent."""
        if self._closed:
            return
        if self._thread.is_alive():
            for ep in list(self.bridge.episodes.values()):
                with contextlib.suppress(Exception):
                    self.abandon(ep)
            self._closed = True
            with contextlib.suppress(Exception):
                self._call(self._shutdown(), timeout=END_WAIT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._closed = True
        if self._thread.is_alive():
            log.warning("the training session's loop did not stop")
        else:
            self._loop.close()
        stop_all(self._processes)
        if self._embedded is not None:
            self._embedded.stop()
        with contextlib.suppress(Exception):
            records = self.folder.read_records()
            table, rates = summarize(records, self.config)
            self.folder.write_summary(
                table, rates, {"tournament": self.tid, "matches": len(records), "training": True}
            )
        self.folder.close()

    async def _shutdown(self) -> None:
        if self._storing:
            # A match whose end the caller has been handed may still be storing its record: let
            # it finish (a match that never ended is not waited for again).
            await asyncio.wait(set(self._storing), timeout=STORE_WAIT_S)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._service is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._service.stop(), 10)
        if self._obs is not None:
            with contextlib.suppress(Exception):
                await self._obs.stop()
        for nc in (self._learner_nc, self._nc):
            if nc is None:
                continue
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.drain(), 10)
            with contextlib.suppress(Exception):
                await nc.close()

    def __enter__(self) -> TrainingSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def session_for(
    config: TournamentConfig | str | Path | None, session: TrainingSession | None, options: dict[str, Any]
) -> tuple[TrainingSession, bool]:
    """An environment's session: the one given (shared, not the environment's to close), or a new
    one from `config` and `options` (then owned). Returns (session, owned)."""
    if session is not None:
        if config is not None or options:
            raise ValueError("give either a TrainingSession or a tournament file with session options")
        return session, False
    if config is None:
        raise ValueError("give a tournament file (or TournamentConfig), or a TrainingSession")
    return TrainingSession(config, **options), True


def check_opponents(session: TrainingSession, names: list[str] | None, need: int) -> list[str]:
    """The agent names for the `need` seats not learning: as given, or the file's agents in turn."""
    agents = list(session.config.agents)
    if names is None:
        names = [agents[i % len(agents)] for i in range(need)]
    if len(names) != need:
        raise ValueError(f"{len(names)} opponents named for {need} seats not learning")
    unknown = [n for n in names if n not in agents]
    if unknown:
        raise ValueError(f"opponents {unknown} are not among the tournament file's agents {agents}")
    return list(names)
