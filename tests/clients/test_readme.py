"""The LangChain and LlamaIndex examples of clients/python/README.md run as written.

Each is the ```python block marked by `<!-- readme-test: NAME -->` right before its fence. It
runs in a process of its own with this interpreter, against the live Treue of the fixture and
the local OpenAI-compatible server: only Treue's URL and key are swapped in the text, and the
model's endpoint comes from the variables the SDKs read (`OPENAI_BASE_URL`, `OPENAI_API_KEY`;
`OPENAI_API_BASE` for llama-index-llms-openai). That package cannot be installed beside
openai 3, so `llama_index.llms.openai.OpenAI` is tests/support/llama_index_llm.py's CustomLLM
on the real openai SDK, put first on the path.

The process has no network: an audit hook refuses (and reports) every connection to, and every
name look-up of, a host other than this machine, so an example (or LlamaIndex fetching a
tokenizer, LangSmith tracing) that reaches for the internet fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitoring.models import Answer
from tests.clients.conftest import USE_CASE, Treue, free_port
from tests.support.llama_index_llm import STANDIN_PACKAGE
from tests.support.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "clients" / "python" / "README.md"
TAG_RE = re.compile(r"^<!--\s*readme-test:\s*(\S+?)\s*-->$")
PLACEHOLDER_URL = '"https://treue.example"'
PLACEHOLDER_KEY = '"trk_…"'
BLOCKED = "treue-test: network blocked"
# Runs the example at argv[1] as __main__, with no network beyond this machine.
RUNNER = f'''
import runpy, sys

LOCAL = {{"127.0.0.1", "::1", "localhost", b"127.0.0.1", b"localhost"}}

def no_network(event, args):
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if host is not None and host not in LOCAL:
        print("{BLOCKED}:", event, host, file=sys.stderr, flush=True)
        raise OSError("{BLOCKED}: " + repr(host))

sys.addaudithook(no_network)
runpy.run_path(sys.argv[1], run_name="__main__")
'''
TIMEOUT = 120


def tagged_blocks(text: str) -> dict[str, str]:
    """Each tagged ```python block's code by its tag."""
    lines = text.splitlines(keepends=True)
    blocks: dict[str, str] = {}
    for index, line in enumerate(lines):
        match = TAG_RE.match(line.strip())
        if not match:
            continue
        assert lines[index + 1].strip() == "```python", (
            f"README line {index + 1}: a readme-test tag not right before a python fence"
        )
        end = next(i for i in range(index + 2, len(lines)) if lines[i].startswith("```"))
        assert match.group(1) not in blocks, f"tag {match.group(1)} used twice"
        blocks[match.group(1)] = "".join(lines[index + 2 : end])
    return blocks


def test_every_framework_example_is_run() -> None:
    text = README.read_text()
    blocks = tagged_blocks(text)
    assert set(blocks) == {"langchain", "llama-index"}
    assert "treue_client.langchain" in blocks["langchain"]
    assert "treue_client.llama_index" in blocks["llama-index"]
    python_blocks = re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    for code in python_blocks:
        if "treue_client.langchain" in code or "treue_client.llama_index" in code:
            assert code in blocks.values(), "a framework example that no test runs"
    for code in blocks.values():
        # At most ten lines after the imports, as the issue asks.
        body = [line for line in code.splitlines()
                if line.strip() and not line.startswith(("from ", "import "))]
        assert len(body) <= 10, body


def run_example(
    tag: str, treue: Treue, openai_server: FakeOpenAIServer, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    code = tagged_blocks(README.read_text())[tag]
    assert code.count(PLACEHOLDER_URL) == 1 and code.count(PLACEHOLDER_KEY) == 1
    assert f'"{USE_CASE}"' in code
    code = code.replace(PLACEHOLDER_URL, repr(treue.url)).replace(PLACEHOLDER_KEY, repr(treue.key))
    example = tmp_path / f"{tag}.py"
    example.write_text(code)
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    standin = tmp_path / "standin" / "llama_index" / "llms" / "openai"
    standin.mkdir(parents=True)
    (standin / "__init__.py").write_text(STANDIN_PACKAGE)
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = {
        name: value for name, value in os.environ.items()
        if not name.startswith(("OPENAI_", "LANGSMITH_", "LANGCHAIN_"))
        and name.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    env.update(
        OPENAI_BASE_URL=openai_server.base_url,
        OPENAI_API_BASE=openai_server.base_url,
        OPENAI_API_KEY="sk-test",
        PYTHONPATH=os.pathsep.join([str(tmp_path / "standin"), str(ROOT)]),
        HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere, ALL_PROXY=nowhere,
        http_proxy=nowhere, https_proxy=nowhere, all_proxy=nowhere,
        NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
        PYTHONDONTWRITEBYTECODE="1",
    )
    done = subprocess.run(
        [sys.executable, str(runner), str(example)],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT,
    )
    assert BLOCKED not in done.stderr, done.stderr
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.parametrize("tag", ["langchain", "llama-index"])
def test_the_example_records_its_answer(
    tag: str, treue: Treue, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    done = run_example(tag, treue, openai_server, tmp_path)

    # The example prints the model's answer; the client sent it before the process ended.
    answers = list(Answer.objects.all())
    assert len(answers) == 1, done.stderr
    stored = answers[0]
    assert stored.text and stored.text in done.stdout
    assert stored.question == "Wie lange gilt die Widerrufsfrist?"
    assert stored.model == "gpt-4.1-mini"
    assert stored.logprobs_status == "ok"
    assert stored.token_data is not None
    assert len(stored.token_data["lp"]) > 20
    assert [(c.text, c.score) for c in stored.chunks.all()] == [
        ("Die Widerrufsfrist beträgt 14 Tage.", 0.82)
    ]
    assert stored.messages is not None
    assert stored.messages[-1]["role"] == "user"
    assert openai_server.requests[-1]["logprobs"] is True
