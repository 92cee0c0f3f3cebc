"""A code world model of two-player Kuhn poker in the CWM API (states {"history", "text"}),
with the hidden-history inference function `resample_history` (appendix H.3 / H.5) and the
hidden-state one `resample_state` (H.4)."""

import random

MOVES = {"Pass": "p", "Bet": "b"}


def _parse(history):
    cards = [int(a.split(":")[1]) for a in history if a.startswith("Deal:")]
    bets = "".join(MOVES[a] for a in history if a in MOVES)
    return cards, bets


def _over(bets):
    return bets in ("pp", "bb", "bp", "pbb", "pbp")


def get_current_player(state):
    cards, bets = _parse(state["history"])
    if len(cards) < 2:
        return -1
    if _over(bets):
        return -4
    return len(bets) % 2


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    cards, bets = _parse(state["history"])
    if len(cards) < 2 or not _over(bets):
        return [0.0, 0.0]
    if bets == "bp":
        return [1.0, -1.0]
    if bets == "pbp":
        return [-1.0, 1.0]
    stake = 2.0 if "b" in bets else 1.0
    win = 0 if cards[0] > cards[1] else 1
    return [stake, -stake] if win == 0 else [-stake, stake]


def get_legal_actions(state):
    p = get_current_player(state)
    if p == -4:
        return []
    if p == -1:
        cards, _ = _parse(state["history"])
        return [f"Deal:{c}" for c in range(3) if c not in cards]
    return ["Pass", "Bet"]


def _text(history):
    cards, bets = _parse(history)
    parts = [str(c) for c in cards] + ([bets] if bets else [])
    return " ".join(parts)


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(history)}


def get_observations(state):
    cards, bets = _parse(state["history"])
    return [(str(cards[p]) if len(cards) > p else "") + (bets if len(cards) == 2 else "") for p in range(2)]


def resample_history(obs_action_history, player_id, last_is_terminal=False):
    last = obs_action_history[-1][0]
    mine, bets = int(last[0]), last[1:]
    other = random.choice([c for c in range(3) if c != mine])
    deals = [mine, other] if player_id == 0 else [other, mine]
    inverse = {v: k for k, v in MOVES.items()}
    return [f"Deal:{c}" for c in deals] + [inverse[b] for b in bets]


def resample_state(obs_action_history, player_id):
    """Appendix H.4: a state (not a history) that recreates the seat's last observation."""
    state = {"history": [], "text": _text([])}
    for action in resample_history(obs_action_history, player_id):
        state = apply_action(state, action)
    return state
