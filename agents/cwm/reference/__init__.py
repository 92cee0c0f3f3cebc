"""Hand-written code world models (the reference a synthesized model is measured against in
tests and benchmarks). They are loaded as code into the sandbox, like any generated model."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


# Game spec (as `spielbus cwm reference` and a model folder's meta name it) -> module here.
REFERENCE = {
    "tic_tac_toe": "tic_tac_toe",
    "connect_four": "connect_four",
    "kuhn_poker": "kuhn_poker",
    "leduc_poker": "leduc_poker",
    "mnk(m=6,n=6,k=4)": "gen_tic_tac_toe",  # generalized tic-tac-toe (appendix I.4)
    "army5x5a": "army5x5a",  # generalized chess (appendix I.5)
    "quadranto": "quadranto",  # appendix I.9
    "hand_of_war": "hand_of_war",  # appendix I.10
}


def reference_code(game: str) -> str:
    return (HERE / f"{REFERENCE.get(game, game)}.py").read_text()
