"""Reads of the judge tier for its pages, the answer page and the dashboard: runs (`runs.py`), what
the judge costs (`costs.py`), the paths its verdicts took and the evidence it writes (`paths.py`).
"""
