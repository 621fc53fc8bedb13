"""The base package stays httpx-only: importing treue_client (and instrumenting an openai
client) loads neither LangChain nor LlamaIndex; only their own modules do."""

from __future__ import annotations

import subprocess
import sys

import pytest

# integration: each check imports the package in a fresh Python process.
pytestmark = pytest.mark.integration

CHECK = """
import sys
import treue_client
from treue_client import TreueClient, instrument
loaded = sorted(m for m in sys.modules if m.split(".")[0] in
                ("langchain_core", "langchain_openai", "llama_index", "openai"))
print(loaded)
"""


def test_the_base_package_imports_no_framework() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_each_framework_module_imports_its_framework_only() -> None:
    for module, framework, other in (
        ("treue_client.langchain", "langchain_core", "llama_index"),
        ("treue_client.llama_index", "llama_index", "langchain_core"),
    ):
        code = (
            f"import sys, {module}\n"
            f"print({framework!r} in sys.modules, {other!r} in sys.modules)"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
            check=True,
        )
        assert done.stdout.split() == ["True", "False"], (module, done.stdout)
