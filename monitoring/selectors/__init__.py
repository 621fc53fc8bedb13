"""Reads of the monitoring app: answers and use cases (`answers.py`), the judge tier
(judging/selectors.py, re-exported here for the pages). Every query a person
triggers goes through the use cases that person may see."""
