"""The demo as its own app: demo data and seeding, the demo judge/generator server, `seed_demo`.

Installed only when the demo runs (``TREUE_DEMO=1``, which ``scripts/demo.sh`` sets): then
``treue_site.settings`` adds it to ``INSTALLED_APPS`` and its ``seed_demo`` command exists. No
product module imports it; the pages mark the demo judge's runs by the model name in the
setting ``TREUE_DEMO_JUDGE_MODEL``, which the demo sets to ``data.DEMO_JUDGE_MODEL``.

``python -m treue_demo.server`` (``server.py``) needs neither Django nor the database, so this
package's ``__init__`` imports nothing.
"""
