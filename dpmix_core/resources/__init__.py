"""What the machine can afford and how files are written: the cost model in front of every computation
(limits.py: DPMIX_MAX_MEMORY, DPMIX_MAX_SECONDS, ...), safe writes that never lose or half-write a user's
file (files.py), and the bounded in-memory memo a long-lived sweep worker lends to its runs (memo.py).
Depends on nothing else in dpmix_core, so every layer can use it.
"""
