"""Writes of the judge tier: judge runs (`runs.py`) and rescoring (`rescoring.py`)."""
