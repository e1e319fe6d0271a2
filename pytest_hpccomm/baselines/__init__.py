"""Baselines: the JSON baseline store, verdicts, and the SQLite history with change points."""
