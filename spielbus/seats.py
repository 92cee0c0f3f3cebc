"""The human seats of a `spielbus run`: a token and a port for each `human` agent it starts.

`spielbus run` makes each seat's token here and hands it to the agent process in its
environment (`SPIELBUS_SEAT_TOKEN`, never on the command line, where `ps` shows it), fixes the
seat page's port (a free one unless the options name it), prints the address with the token on
its console, and gives the live page the address without it. Without the token the seat page
shows nothing and takes no move (`agents.human.seat`).

Limits: a human seat is one person, so one replica; agents marked `external` (e.g. `spielbus
agent human` on the player's own machine) print their own address.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from agents.human.seat import TOKEN_ENV, SeatAddress
from bus.process import free_port
from referee.config import ConfigError, TournamentConfig


@dataclass(frozen=True)
class SeatPlan(SeatAddress):
    agent: str

    def env(self) -> dict[str, str]:
        return {TOKEN_ENV: self.token}


def plan_seats(config: TournamentConfig, agent_options: dict[str, dict[str, Any]]) -> dict[str, SeatPlan]:
    """A seat per `human` agent this run starts; fixes `seat_port` in `agent_options` in place."""
    plans = {}
    for name, agent in config.agents.items():
        if agent.external or agent.kind != "human":
            continue
        if agent.replicas != 1:
            raise ConfigError(
                f"agents.{name}.replicas: a human seat is one player, so replicas must be 1 "
                f"(got {agent.replicas})"
            )
        opts = agent_options[name]
        host = str(opts.get("seat_host", "127.0.0.1"))
        port = opts.get("seat_port") or free_port("127.0.0.1" if host in ("0.0.0.0", "::") else host)
        agent_options[name] = {**opts, "seat_port": port}
        plans[name] = SeatPlan(agent=name, host=host, port=int(port), token=secrets.token_urlsafe(24))
    return plans
