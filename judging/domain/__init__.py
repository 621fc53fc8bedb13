"""The judge's plain-Python core: prompts (`judge_prompt`), reading replies (`judge_parse`),
judging one answer with an injected call (`judging`), scoring (`scoring`) and expected cost
(`cost`). No django, no openai (tests/domain/test_domain_purity.py)."""
