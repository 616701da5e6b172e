"""What the machine can afford and how files are written: the cost model in front of every computation
(limits.py: DPMIX_MAX_MEMORY, DPMIX_MAX_SECONDS, ...) and safe writes that never lose or half-write a user's
file (files.py). Depends on nothing else in dpmix_core, so every layer can use it.
"""
