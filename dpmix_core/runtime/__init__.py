"""Where work runs: the SQLite results store, background worker processes, the Ray backend."""
