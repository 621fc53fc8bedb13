"""Reads of the core: who may see which use case and answer, and which service a key belongs to
(`access.py`), the health report (`health.py`).
"""
