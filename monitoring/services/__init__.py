"""Writes of the monitoring app: ingest (`ingest.py`), retention, alarms, health. The judge
tier's are in judging/services/."""
