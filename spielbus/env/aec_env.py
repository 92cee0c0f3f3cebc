"""`BusAECEnv`: a PettingZoo AEC environment with several learning seats, the rest agents on the bus.

Agents are `player_<seat>` for the learning seats (all seats by default: self-play through the
referee). Every learning seat is served by the one learner agent (a seat name may repeat in a match),
so the referee asks whichever seat is to move, and `agent_selection` is that seat; in a simultaneous
game several seats are asked at once and selected one after another. Other seats are agents of the
tournament file's `[agents]`, as in `BusEnv`. Observations, actions, rewards (per step in
perfect-information games that pay along the way, else at the end), `info` and the outcomes of bad
input are `BusEnv`'s (docs/env.md); when the match ends every learning seat gets the rest of its
return and is then stepped with `None` (PettingZoo's dead step).

Limit: `observe(agent)` of a seat that has not been asked yet in this match is its space's zero
observation (no legal action): the referee sends a seat its view only when it asks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from bus.protocol import MatchRecord
from referee.config import TournamentConfig
from spielbus.env.bridge import Ask, Episode
from spielbus.env.gym_env import MAX_EMPTY_MATCHES, action_id, seat_list
from spielbus.env.session import EnvError, TrainingSession, check_opponents, session_for
from spielbus.env.views import Obs, Views, earned, pays_along


class BusAECEnv(AECEnv[str, Obs, int]):
    """Several learning seats (`learning_seats`, default all) against agents on the bus."""

    metadata = {"render_modes": ["ansi"], "name": "spielbus_bus_v0", "is_parallelizable": False}  # noqa: RUF012

    def __init__(
        self,
        config: TournamentConfig | str | Path | None = None,
        *,
        session: TrainingSession | None = None,
        learning_seats: list[int] | None = None,
        opponents: list[str] | None = None,
        tensors: bool = True,
        render_mode: str | None = None,
        **session_options: Any,
    ) -> None:
        super().__init__()
        self.session, self._owns_session = session_for(config, session, session_options)
        n = int(self.session.game.num_players())
        seats = sorted(set(range(n) if learning_seats is None else learning_seats))
        if not seats or any(not isinstance(s, int) or not 0 <= s < n for s in seats):
            raise ValueError(f"learning_seats must name seats among 0..{n - 1}, not {learning_seats!r}")
        self.num_players = n
        self.learning_seats = seats
        self.opponents = check_opponents(self.session, opponents, n - len(seats))
        self.views = Views(self.session.game, tensors)
        self.possible_agents = [f"player_{s}" for s in seats]
        self.render_mode = render_mode
        self._rng: np.random.Generator | None = None
        self._ep: Episode | None = None
        self._pending: dict[str, Ask] = {}
        self._obs: dict[str, Obs] = {}
        self._extras: dict[str, dict[str, Any]] = {}
        self._stepwise = pays_along(self.session.game)
        self._earned: dict[str, float] = {}  # per learning seat, in games that pay along the way
        self.agents: list[str] = []
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}
        self.agent_selection = self.possible_agents[0]

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.views.observation_space

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.views.action_space

    def observe(self, agent: str) -> Obs:
        obs = self._obs.get(agent) or self.views.final(None)
        return {k: v.copy() for k, v in obs.items()}

    # -- episodes -----------------------------------------------------------------------------

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None or self._rng is None:
            self._rng, _ = seeding.np_random(seed)
        extras: dict[str, Any] = {}
        if self._ep is not None and not self._ep.done:
            extras["abandoned"] = self._ep.spec.match_id
            self.session.abandon(self._ep)
        opponents = check_opponents(
            self.session, (options or {}).get("opponents") or self.opponents, len(self.opponents)
        )
        for _ in range(MAX_EMPTY_MATCHES):
            self.agents = self.possible_agents[:]
            self.rewards = {a: 0.0 for a in self.agents}
            self._cumulative_rewards = {a: 0.0 for a in self.agents}
            self.terminations = {a: False for a in self.agents}
            self.truncations = {a: False for a in self.agents}
            self.infos = {a: dict(extras) for a in self.agents}
            self._pending, self._obs, self._extras = {}, {}, {}
            self._earned = dict.fromkeys(self.agents, 0.0)
            assert self._rng is not None
            seats = seat_list(self.session.learner, self.learning_seats, opponents, self.num_players)
            secret, match_seed = self._rng.bytes(16).hex(), int(self._rng.integers(2**31))
            self._ep = self.session.start_match(
                seats, secret, match_seed, tensors=self.views.tensor is not None
            )
            if self._await():
                for a in self.agents:
                    self.infos[a]["match_id"] = self._ep.spec.match_id
                return
        raise EnvError(f"{MAX_EMPTY_MATCHES} matches in a row ended before a learning seat was asked")

    def _await(self) -> bool:
        """Wait for the referee to ask a learning seat (selected; True) or end the match (False)."""
        assert self._ep is not None
        event = self._ep.next_event(None, self.session.alive)
        if isinstance(event, Ask):
            agent = f"player_{event.turn.seat}"
            self._pending[agent] = event
            self._obs[agent] = self.views.observe(event.turn)
            self.infos[agent] = {**self.views.info(event.turn), **self._extras.pop(agent, {})}
            self.agent_selection = agent
            if self._stepwise and event.turn.state is not None:
                total = earned(self.session.game, event.turn.state, event.turn.seat)
                self.rewards[agent] = total - self._earned[agent]
                self._earned[agent] = total
            return True
        self._finish(event)
        return False

    def _finish(self, record: MatchRecord) -> None:
        truncated = record.outcome == "max_turns"
        for agent in self.agents:
            seat = int(agent.removeprefix("player_"))
            # The return less what per-step rewards paid already (nothing, in games that pay at the end).
            ret = float(record.returns[seat]) if record.returns else 0.0
            self.rewards[agent] = ret - self._earned.get(agent, 0.0)
            self.terminations[agent] = not truncated
            self.truncations[agent] = truncated
            self._obs[agent] = self.views.final(self._obs.get(agent))
            self.infos[agent] = {
                **self._extras.pop(agent, {}),
                "outcome": record.outcome,
                "returns": list(record.returns),
                "forfeited": seat in record.forfeited,
                "faults": [f.model_dump(exclude={"latency_ms"}) for f in record.faults if f.seat == seat],
            }
        self.agent_selection = self.agents[0]

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations.get(agent) or self.truncations.get(agent):
            self._was_dead_step(action)
            return
        ask = self._pending.get(agent)
        if ask is None:
            raise RuntimeError("step() before reset(): call reset() first")
        a = action_id(action, self.views.num_actions)
        del self._pending[agent]
        extras: dict[str, Any] = {}
        if a not in {la.id for la in ask.turn.legal_actions}:
            extras = {"illegal": True, "fault_policy": self.session.config.policy.kind}
        if not ask.answer(a):
            extras["late"] = True
        self._extras[agent] = extras
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {x: 0.0 for x in self.agents}
        if self._pending:  # a simultaneous node: the next seat asked at once
            self.agent_selection = next(iter(self._pending))
        else:
            self._await()
        self._accumulate_rewards()

    @property
    def match_id(self) -> str | None:
        return self._ep.spec.match_id if self._ep is not None else None

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return str(self.infos.get(self.agent_selection, {}).get("text", ""))

    def close(self) -> None:
        if self._ep is not None and not self._ep.done and self.session.alive():
            self.session.abandon(self._ep)
        self._ep = None
        if self._owns_session:
            self.session.close()
