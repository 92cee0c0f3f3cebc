"""`BusEnv`: a Gymnasium environment whose one learning seat plays agents on the bus.

Each episode is one match, refereed by Spielbus: `reset()` starts a match with the learner in its
seat and the opponents (names from the tournament file's `[agents]`) in the others, and returns the
learner's first observation; `step(action)` answers the referee's pending turn and returns when the
referee asks the learner again (the opponents' moves, chance and hidden information in between are
the referee's) or when the match has ended. The reward is the learner's return, given at the end
(0 before), except in perfect-information games that pay along the way (OpenSpiel's `REWARDS`
model: 2048, cliff walking, ...), where each step pays what the learner earned since its last
decision, replayed from the turn's true action list, and the end pays the rest of the return.
`terminated` at a normal end, a forfeit or a referee error; `truncated` when the match reached the
tournament's `max_turns`.

Bad input and odd moments (docs/env.md has the table):

- an action that is not an integer in `Discrete(num_distinct_actions)`: `ValueError`, nothing sent;
- an in-range action that is not legal now: sent as it is; the referee records an `illegal` fault
  and applies the tournament's fault policy (`forfeit`: the match ends, reward the game's minimum;
  `retry`: the same decision comes back with `info["retry"]`; `random`: the referee plays a random
  legal move for the learner). `info["illegal"]` and `info["fault_policy"]` say so;
- `step()` before `reset()` or after the end: `RuntimeError`;
- `reset()` while a match is live: that match is abandoned (the learner's further turns are refused,
  an `error` fault, handled by the fault policy) and waited for, so it ends with a record; then a new
  match starts. `info["abandoned"]` names it;
- an opponent that disconnects, times out or errs: the referee's fault policy against it (by default
  it forfeits: the learner's reward is the game's maximum), `info["outcome"] == "forfeit"`;
- the learner slower than `deadline_ms` between observation and `step()`: a `timeout` fault of the
  learner, by the same policy; `info["late"]` says the action arrived too late.

`close()` abandons a live match and, when the environment made its session, stops everything.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from bus.protocol import MatchRecord
from referee.config import TournamentConfig
from spielbus.env.bridge import Ask, Episode, answer_all
from spielbus.env.session import EnvError, TrainingSession, check_opponents, session_for
from spielbus.env.views import Obs, Views, earned, pays_along

log = logging.getLogger(__name__)

# A match that ends before the learner's first turn (an opponent forfeits at once) is replaced;
# after this many in a row, reset() gives up.
MAX_EMPTY_MATCHES = 8


def action_id(action: Any, num_actions: int) -> int:
    """`action` as an OpenSpiel action id, or ValueError: integers (Python or NumPy) in range only."""
    if isinstance(action, np.ndarray) and action.shape == ():
        action = action.item()
    if isinstance(action, bool) or not isinstance(action, int | np.integer):
        raise ValueError(f"an action is an integer action id, not {type(action).__name__} {action!r}")
    a = int(action)
    if not 0 <= a < num_actions:
        raise ValueError(f"action {a} is out of range: this game's actions are 0..{num_actions - 1}")
    return a


def seat_list(learner: str, seats: list[int], opponents: list[str], n: int) -> list[str]:
    """The match's seats: the learner at `seats`, the opponents in order in the others."""
    others = iter(opponents)
    return [learner if i in seats else next(others) for i in range(n)]


# Answers queued by `BusEnv._send` for one `BusEnv.send_batch`: the turn, the action, the step's extras.
Answers = list[tuple[Ask, int, dict[str, Any]]]


class BusEnv(gym.Env[Obs, np.int64]):
    """One learning seat against agents on the bus. Give a tournament file (or its config) and
    session options, or an existing `TrainingSession` (shared, not closed by this environment)."""

    metadata = {"render_modes": ["ansi"]}  # noqa: RUF012 (Gymnasium's class attribute)

    def __init__(
        self,
        config: TournamentConfig | str | Path | None = None,
        *,
        session: TrainingSession | None = None,
        opponents: list[str] | None = None,
        seat: int | None = 0,
        tensors: bool = True,
        render_mode: str | None = None,
        **session_options: Any,
    ) -> None:
        self.session, self._owns_session = session_for(config, session, session_options)
        self.num_players = int(self.session.game.num_players())
        self.views = Views(self.session.game, tensors)
        self.observation_space = self.views.observation_space  # type: ignore[assignment]  # a Dict of arrays
        self.action_space = self.views.action_space
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r}: only 'ansi'")
        self.render_mode = render_mode
        self.opponents = self._opponents(opponents)
        self.seat = self._seat(seat)
        self._ep: Episode | None = None
        self._ask: Ask | None = None
        self._seat_now = 0
        self._stepwise = pays_along(self.session.game)
        self._earned = 0.0  # the learner's rewards so far in this match (per-step games only)
        self._last: Obs | None = None
        self._text = ""

    # -- checks -------------------------------------------------------------------------------

    def _opponents(self, names: list[str] | None) -> list[str]:
        return check_opponents(self.session, names, self.num_players - 1)

    def _seat(self, seat: int | None) -> int | None:
        if seat is not None and not (isinstance(seat, int) and 0 <= seat < self.num_players):
            raise ValueError(
                f"seat must be None (random per episode) or 0..{self.num_players - 1}, not {seat!r}"
            )
        return seat

    # -- episodes (split so that a vector environment can run many at once) --------------------

    def _begin_reset(self, options: dict[str, Any] | None) -> dict[str, Any]:
        options = dict(options or {})
        extras: dict[str, Any] = {}
        if self._ep is not None and not self._ep.done:
            extras["abandoned"] = self._ep.spec.match_id
            self.session.abandon(self._ep)
        self._ep, self._ask, self._last = None, None, None
        self._earned = 0.0
        opponents = self._opponents(options.pop("opponents", None) or self.opponents)
        seat = self._seat(options.pop("seat", self.seat))
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}: only 'opponents' and 'seat'")
        self._seat_now = seat if seat is not None else int(self.np_random.integers(self.num_players))
        self._start(opponents)
        return extras

    def _start(self, opponents: list[str]) -> None:
        seats = seat_list(self.session.learner, [self._seat_now], opponents, self.num_players)
        # The chance secret and the match seed (which seeded agents mix into their choices) from the
        # environment's seeded RNG: a seeded reset replays the same match.
        secret = self.np_random.bytes(16).hex()
        seed = int(self.np_random.integers(2**31))
        self._ep = self.session.start_match(seats, secret, seed, tensors=self.views.tensor is not None)
        self._opponents_now = opponents

    def _finish_reset(self, extras: dict[str, Any]) -> tuple[Obs, dict[str, Any]]:
        for _ in range(MAX_EMPTY_MATCHES):
            assert self._ep is not None
            event = self._ep.next_event(None, self.session.alive)
            if isinstance(event, Ask):
                return self._observed(event), {
                    **self.views.info(event.turn),
                    "match_id": self._ep.spec.match_id,
                    **extras,
                }
            log.warning("match %s ended before the learner's first turn: %s", event.match_id, event.outcome)
            self._start(self._opponents_now)
        raise EnvError(f"{MAX_EMPTY_MATCHES} matches in a row ended before the learner's first turn")

    def _observed(self, ask: Ask) -> Obs:
        self._ask = ask
        self._text = ask.turn.observation
        self._last = self.views.observe(ask.turn)
        return {k: v.copy() for k, v in self._last.items()}

    def _send(self, action: Any, batch: Answers) -> dict[str, Any]:
        """Queue the answer to the learner's turn with `action` in `batch`, for `send_batch` (one
        hand-off to the session's loop for every sub-environment of a vector environment's step)."""
        if self._ask is None:
            raise RuntimeError(
                "step() after the end of the match: call reset()"
                if self._ep is not None
                else "step() before reset(): call reset() first"
            )
        a = action_id(action, self.views.num_actions)
        extras: dict[str, Any] = {}
        if a not in {la.id for la in self._ask.turn.legal_actions}:
            extras = {"illegal": True, "fault_policy": self.session.config.policy.kind}
        batch.append((self._ask, a, extras))
        self._ask = None
        return extras

    @staticmethod
    def send_batch(batch: Answers) -> None:
        """Send the answers `_send` queued in `batch`, with one hand-off to the session's loop; an
        answer that came too late (its turn already over) is marked `late` in its extras."""
        if not batch:
            return
        sent = answer_all([(ask, a) for ask, a, _ in batch])
        for (_, _, extras), ok in zip(batch, sent, strict=True):
            if not ok:
                extras["late"] = True

    def _receive(self, extras: dict[str, Any]) -> tuple[Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        assert self._ep is not None
        event = self._ep.next_event(None, self.session.alive)
        if isinstance(event, Ask):
            obs = self._observed(event)
            return obs, self._step_reward(event), False, False, {**self.views.info(event.turn), **extras}
        return self._ended(event, extras)

    def _step_reward(self, ask: Ask) -> float:
        """What the learner earned since its last decision: replayed from the turn's true action
        list in a game that pays along the way, else 0 (the return comes at the end)."""
        if not self._stepwise or ask.turn.state is None:
            return 0.0
        total = earned(self.session.game, ask.turn.state, self._seat_now)
        reward, self._earned = total - self._earned, total
        return reward

    def _ended(
        self, record: MatchRecord, extras: dict[str, Any]
    ) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        seat = self._seat_now
        info = {
            **extras,
            "outcome": record.outcome,
            "returns": list(record.returns),
            "forfeited": seat in record.forfeited,
            # Without latencies: the same seeded episode gives the same info.
            "faults": [f.model_dump(exclude={"latency_ms"}) for f in record.faults if f.seat == seat],
        }
        # The return less what per-step rewards paid already (nothing, in games that pay at the end).
        reward = (float(record.returns[seat]) if record.returns else 0.0) - self._earned
        truncated = record.outcome == "max_turns"
        return self.views.final(self._last), reward, not truncated, truncated, info

    # -- Gymnasium ----------------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start a match (abandoning a live one). `options`: `opponents` (names for the other
        seats) and `seat` (the learner's seat, None for random), for this episode only."""
        super().reset(seed=seed)
        return self._finish_reset(self._begin_reset(options))

    def step(self, action: Any) -> tuple[Obs, SupportsFloat, bool, bool, dict[str, Any]]:
        answers: Answers = []
        extras = self._send(action, answers)
        self.send_batch(answers)
        return self._receive(extras)

    @property
    def match_id(self) -> str | None:
        return self._ep.spec.match_id if self._ep is not None else None

    @property
    def record(self) -> MatchRecord | None:
        """The referee's record of the current match once it has ended (every move, chance
        included, and the chance secret), None while it is live."""
        return self._ep.record if self._ep is not None else None

    def render(self) -> str | None:  # 'ansi': the learner's text view
        return self._text if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self._ep is not None and not self._ep.done and self.session.alive():
            try:
                self.session.abandon(self._ep)
            except EnvError:
                log.warning("closing: match %s did not end", self._ep.spec.match_id, exc_info=True)
        self._ep, self._ask = None, None
        if self._owns_session:
            self.session.close()
        super().close()
