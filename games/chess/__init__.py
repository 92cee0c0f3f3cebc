"""Chess helpers shared by the Stockfish agent, the puzzle suite and PGN export.

`uci` maps OpenSpiel chess action ids to python-chess moves and back; `puzzles`
loads the shipped mate-in-N suite. Nothing here imports pyspiel.
"""
