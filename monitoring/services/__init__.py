"""Writes of the core: use cases and services (`use_cases.py`), the weekly rollups, retention and
partitions, the answer record, worker heartbeats, settings changes (`tuning.py`).
"""
