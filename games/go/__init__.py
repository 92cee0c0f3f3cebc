"""Go helpers shared by the `gnugo` agent, the run report and the papers' tables, as games/chess/
is for chess.

`score` counts the Tromp-Taylor area of a finished match from OpenSpiel's own text of it; `gtp`
is a small Go Text Protocol client with the mapping between OpenSpiel's action ids and GTP
vertices; `gnugo` finds, starts and sets up GNU Go and asks its dead-stone-aware `final_score`.
Nothing here imports an agent. The game itself is OpenSpiel's `go`.
"""
