"""The four new games of "Code World Models for General Game Playing" (Lehrach et al., appendix I).

Importing this package registers the Python games with `pyspiel.register_game`; generalized
tic-tac-toe is OpenSpiel's own `mnk(m=6,n=6,k=4)` (see `gen_tic_tac_toe`). Rules, parameters,
our readings of what the appendix leaves open, and limits are in each module's docstring.
"""

from __future__ import annotations

from games.cwm import army5x5a, gen_tic_tac_toe, hand_of_war, quadranto

__all__ = ["army5x5a", "gen_tic_tac_toe", "hand_of_war", "quadranto"]
