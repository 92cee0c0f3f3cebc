"""A whole game tree as flat numpy arrays, for full-width solvers (CFVFP) on small games.

`GameTree.build(game)` walks every history once (OpenSpiel clones) and records nodes,
edges grouped by depth, information sets and their legal actions, chance probabilities
and terminal payoffs. A solver then runs forward passes (reach probabilities) and
backward passes (expected values) as a few numpy operations per depth level, never
touching OpenSpiel again.

Limits: sequential games with terminal rewards only (Kuhn, Leduc, the tiny-deck simplified
Hold'em; no simultaneous moves); the whole tree must fit in memory (`max_nodes`, default
two million histories). Information sets are keyed by `information_state_string`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyspiel


class TreeTooLarge(ValueError):
    pass


@dataclass
class Level:
    """The edges leaving the nodes of one depth."""

    parent: np.ndarray  # node index of each edge's parent
    child: np.ndarray  # node index of each edge's child
    actor: np.ndarray  # the acting player, or num_players for chance
    chance_prob: np.ndarray  # chance probability (1 on decision edges)
    slot: np.ndarray  # (infoset, action index) flattened as infoset * max_actions + index; -1 on chance
    decision: np.ndarray  # boolean mask: decision edges


@dataclass
class GameTree:
    num_players: int
    num_nodes: int
    levels: list[Level]
    terminal: np.ndarray  # terminal node indices
    utility: np.ndarray  # (num_players, len(terminal))
    infoset_keys: list[str]
    infoset_player: np.ndarray
    infoset_actions: list[list[int]]  # legal action ids per infoset
    infoset_node: np.ndarray  # one node of each infoset (own reach is equal at all of them)
    max_actions: int
    mask: np.ndarray  # (num_infosets, max_actions) True where the action exists

    @property
    def num_infosets(self) -> int:
        return len(self.infoset_keys)

    @classmethod
    def build(cls, game: pyspiel.Game, max_nodes: int = 2_000_000) -> GameTree:
        gt = game.get_type()
        if gt.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise ValueError(f"{gt.short_name}: only sequential games have a tree here")
        n = game.num_players()
        keys: dict[str, int] = {}
        inf_player: list[int] = []
        inf_actions: list[list[int]] = []
        inf_node: list[int] = []
        # Edge columns, per depth.
        edges: dict[int, list[list[float]]] = {}
        terminal: list[int] = []
        utility: list[list[float]] = []
        count = 1
        stack: list[tuple[pyspiel.State, int, int]] = [(game.new_initial_state(), 0, 0)]
        while stack:
            state, node, depth = stack.pop()
            if state.is_terminal():
                terminal.append(node)
                utility.append(state.returns())
                continue
            level = edges.setdefault(depth, [[], [], [], [], [], []])  # parent, child, actor, p, infoset, i
            if state.is_chance_node():
                outcomes = state.chance_outcomes()
                for action, prob in outcomes:
                    level[0].append(node)
                    level[1].append(count)
                    level[2].append(n)
                    level[3].append(prob)
                    level[4].append(-1)
                    level[5].append(0)
                    stack.append((state.child(action), count, depth + 1))
                    count += 1
            else:
                player = state.current_player()
                if player < 0:
                    raise ValueError(f"{gt.short_name}: simultaneous or unknown node (player {player})")
                key = state.information_state_string(player)
                legal = state.legal_actions()
                iid = keys.get(key)
                if iid is None:
                    iid = keys[key] = len(inf_player)
                    inf_player.append(player)
                    inf_actions.append(list(legal))
                    inf_node.append(node)
                elif inf_actions[iid] != list(legal):
                    raise ValueError(f"{gt.short_name}: information set {key!r} has differing legal actions")
                for i, action in enumerate(legal):
                    level[0].append(node)
                    level[1].append(count)
                    level[2].append(player)
                    level[3].append(1.0)
                    level[4].append(iid)
                    level[5].append(i)
                    stack.append((state.child(action), count, depth + 1))
                    count += 1
            if count > max_nodes:
                raise TreeTooLarge(f"{gt.short_name}: more than {max_nodes} histories")
        max_actions = max((len(a) for a in inf_actions), default=1)
        levels = []
        for depth in sorted(edges):
            parent, child, actor, prob, iids, index = (np.asarray(c) for c in edges[depth])
            decision = iids >= 0
            slot = np.where(decision, iids * max_actions + index, -1).astype(np.int64)
            levels.append(
                Level(
                    parent=parent.astype(np.int64),
                    child=child.astype(np.int64),
                    actor=actor.astype(np.int64),
                    chance_prob=prob.astype(np.float64),
                    slot=slot,
                    decision=decision,
                )
            )
        mask = np.zeros((len(inf_actions), max_actions), dtype=bool)
        for i, acts in enumerate(inf_actions):
            mask[i, : len(acts)] = True
        return cls(
            num_players=n,
            num_nodes=count,
            levels=levels,
            terminal=np.asarray(terminal, dtype=np.int64),
            utility=np.asarray(utility, dtype=np.float64).T.reshape(n, len(terminal)),
            infoset_keys=list(keys),
            infoset_player=np.asarray(inf_player, dtype=np.int64),
            infoset_actions=inf_actions,
            infoset_node=np.asarray(inf_node, dtype=np.int64),
            max_actions=max_actions,
            mask=mask,
        )
