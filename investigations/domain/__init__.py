"""Investigations' plain-Python domain: no Django, no openai (see STYLE.md)."""
