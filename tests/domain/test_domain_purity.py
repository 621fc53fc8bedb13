"""The domain packages stay plain Python: no django, no openai (see STYLE.md)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every package's domain, found rather than listed: a new app's is covered without an edit.
DOMAIN_DIRS = sorted(
    path for path in ROOT.glob("*/domain")
    if (path / "__init__.py").is_file() and path.parent.name != "tests"
)
EXPECTED = {"common", "monitoring", "ingest", "judging", "dashboard", "review", "investigations",
            "traces"}
FORBIDDEN = {"django", "openai"}


def forbidden_imports(source: str) -> list[str]:
    """Top-level package names from FORBIDDEN that ``source`` imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in FORBIDDEN]
    return found


DOMAIN_FILES = sorted(path for folder in DOMAIN_DIRS for path in folder.rglob("*.py"))


def test_domain_packages_exist():
    assert EXPECTED <= {folder.parent.name for folder in DOMAIN_DIRS}
    assert any(path.name == "logprobs.py" for path in DOMAIN_FILES)


@pytest.mark.parametrize("path", DOMAIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_domain_module_imports_neither_django_nor_openai(path):
    assert forbidden_imports(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import django", ["django"]),
        ("from django.db import models", ["django.db"]),
        ("import os, openai.types as t", ["openai.types"]),
        ("def f():\n    from openai import OpenAI\n", ["openai"]),
        ("try:\n    import django.conf\nexcept ImportError:\n    pass\n", ["django.conf"]),
        ("import djangoish\nfrom . import openai\nimport math", []),
    ],
)
def test_checker_finds_forbidden_imports(source, expected):
    assert forbidden_imports(source) == expected
