"""`spielbus paper NAME`: each hosted paper's headline table, measured through the real referee,
beside the paper's own numbers (research/papers/paper_numbers.toml), with plots and run folders.

Limits: only the Minimax Tree of Thoughts tables are measured so far; the other papers' tables print
a cell that says why they are not (and which existing command measures them).
"""
