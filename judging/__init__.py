"""The judge tier (tier 2) as one package: a judge model decomposes a sampled answer into claims
and checks each against the retrieved chunks.

`domain/` the wording of the prompts, reading the replies, scoring and expected cost (plain
Python) · `client.py` the only module that imports openai · `services/` creating, executing and
reconciling runs (`runs.py`) and rescoring (`rescoring.py`) · `selectors.py` the pages' reads ·
`tasks.py` the Celery tasks. The models (JudgeRun, Claim, JudgePrice) are monitoring's, in
monitoring/models/judging.py.
"""
