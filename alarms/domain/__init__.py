"""The alarms' plain-Python core: what an alarm channel sends and how it is signed
(`channels`). No django, no httpx (tests/domain/test_domain_purity.py)."""
