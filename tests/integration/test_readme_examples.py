"""The examples the README sends its reader to (docs/api.md) run as written against the demo.

The snippets are read from docs/api.md itself: the `curl` call to the ingest API (a ```sh block)
and the Python client's RAG loop (a ```python block that imports `treue_client`), each marked by
an HTML comment right before its fence (`<!-- readme-test: curl-ingest -->`,
`<!-- readme-test: python-instrument -->`). The demo is what `scripts/demo.sh` sets up, on the
test database: `manage.py seed_demo` (at a few per cent of its volume), whose output gives the
key, and `manage.py runserver`. A snippet gets only what the page tells the reader to set:
`TREUE_URL` (this server's address instead of port 8000) and `TREUE_KEY` (the key the demo
printed), and for the Python example an OpenAI-compatible endpoint (`OPENAI_BASE_URL`, here the
local test server). `curl` is the real binary, the Python example runs in a process of its own
with this interpreter (the venv's). Any request to a host other than 127.0.0.1 goes to a proxy
that does not exist, so a snippet that reaches for the internet fails instead. The README and
the other pages of docs/ hold no example that talks to Treue outside docs/api.md, so none goes
unrun.

No worker runs: the answers the demo and the examples send are stored and wait for the judge.
Marked `integration` by their folder (tests/conftest.py): they start Django in processes.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from monitoring.domain.keys import key_prefix
from monitoring.models import Answer
from tests.integration.conftest import BASE_DIR, IN_CI
from tests.support.openai_server import DEFAULT_ANSWER, FakeOpenAIServer
from tests.support.tcp_proxy import free_port
from treue_demo.data import DEMO_JUDGE_MODEL, USE_CASES
from treue_demo.management.commands.seed_demo import DEMO_SERVICE

README = BASE_DIR / "README.md"
# Where the README's examples live, and every page of the guide the README links to: an example
# that talks to Treue must be in the first and run here, never unrun in another.
EXAMPLES = BASE_DIR / "docs" / "api.md"
GUIDE = [
    README,
    EXAMPLES,
    BASE_DIR / "docs" / "configuration.md",
    BASE_DIR / "docs" / "operations.md",
    BASE_DIR / "docs" / "method.md",
    BASE_DIR / "docs" / "judge.md",
    BASE_DIR / "CONTRIBUTING.md",
]
TAG_RE = re.compile(r"<!--\s*readme-test:\s*(\S+?)\s*-->")
FENCE_RE = re.compile(r"^```(\S*)\s*$")
SHELLS = {"sh", "bash", "shell", "console"}
CURL_INGEST = "curl-ingest"
PYTHON_INSTRUMENT = "python-instrument"
# What docs/api.md tells the reader to export before running the examples.
EXPORT_RE = re.compile(
    r"^export TREUE_URL=http://127\.0\.0\.1:8000 TREUE_KEY=<[^>\n]+>$", re.MULTILINE
)
DEMO_SLUGS = {case.slug for case in USE_CASES}
# The demo at a few per cent of its volume: every use case and the key, in seconds.
DEMO_SCALE = "0.02"
STARTUP_TIMEOUT = 60
SNIPPET_TIMEOUT = 60


# --- The guide's snippets --------------------------------------------------------------------


@dataclass(frozen=True)
class Snippet:
    language: str
    code: str
    line: int  # of the opening fence, 1-based
    tag: str | None


def readme_snippets(text: str, name: str = "docs/api.md") -> list[Snippet]:
    """Every fenced block of a page, with the tag of the comment right before its fence."""
    lines = text.splitlines(keepends=True)
    snippets = []
    index = 0
    while index < len(lines):
        opening = FENCE_RE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            pytest.fail(f"{name}:{index + 1}: a fence that is never closed")
        tagged = TAG_RE.fullmatch(lines[index - 1].strip()) if index else None
        snippets.append(
            Snippet(
                language=opening.group(1),
                code="".join(lines[index + 1 : end]),
                line=index + 1,
                tag=tagged.group(1) if tagged else None,
            )
        )
        index = end + 1
    return snippets


def is_ingest_curl(snippet: Snippet) -> bool:
    return (
        snippet.language in SHELLS
        and re.search(r"(^|\s)curl\s", snippet.code) is not None
        and "/api/v1/answers" in snippet.code
    )


def uses_client(snippet: Snippet) -> bool:
    return snippet.language == "python" and "treue_client" in snippet.code


# Every tag docs/api.md may carry, and the kind of example it must mark. A new tag needs a test
# here that runs its snippet: an example nobody ran is how the README came to send to a use
# case the demo does not have.
TAGS = {CURL_INGEST: is_ingest_curl, PYTHON_INSTRUMENT: uses_client}


def tagged(tag: str) -> Snippet:
    found = [s for s in readme_snippets(EXAMPLES.read_text()) if s.tag == tag]
    if len(found) != 1:
        pytest.fail(
            f"docs/api.md must mark exactly one snippet with <!-- readme-test: {tag} --> right "
            f"before its fence; found {len(found)}"
        )
    return found[0]


# --- The demo, live ----------------------------------------------------------------------------


@dataclass
class Demo:
    url: str
    key: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")[-5000:]


def _demo_env(database_url: str, judge_url: str, var_dir: Path) -> dict[str, str]:
    """The environment scripts/demo.sh gives its processes, on the test database, with a broker
    of this test's own (no worker reads it) and the local judge server (never called here)."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="treue_site.settings",
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=f"sqla+sqlite:///{var_dir / 'broker.sqlite3'}",
        DEBUG="True",
        TREUE_DEMO="True",
        TREUE_DEMO_JUDGE_MODEL=DEMO_JUDGE_MODEL,
        TREUE_JUDGE_BASE_URL=judge_url,
        TREUE_JUDGE_MODEL=DEMO_JUDGE_MODEL,
        TREUE_JUDGE_API_KEY="demo",
        TREUE_GENERATOR_BASE_URL=judge_url,
        TREUE_GENERATOR_API_KEY="demo",
        TREUE_VAR_DIR=str(var_dir),
        DB_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


@pytest.fixture
def demo(
    worker_database_url: str,
    judge_server: FakeOpenAIServer,
    tmp_path: Path,
    transactional_db: None,
) -> Iterator[Demo]:
    """The demo's data seeded and its web server started, as scripts/demo.sh does; the key is
    read from what seed_demo prints, as the reader reads it. The server starts while the data
    is seeded: each process takes seconds to import Django."""
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = _demo_env(worker_database_url, judge_server.base_url, var_dir)
    port = free_port()
    log_path = tmp_path / "runserver.log"
    with open(log_path, "ab") as log:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=BASE_DIR, env=env, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        seeded = subprocess.run(
            [sys.executable, "manage.py", "seed_demo", "--scale", DEMO_SCALE],
            cwd=BASE_DIR, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300,
        )
        assert seeded.returncode == 0, f"seed_demo failed:\n{seeded.stdout}\n{seeded.stderr}"
        keys = [word for word in seeded.stdout.split() if key_prefix(word)]
        assert len(keys) == 1, f"seed_demo printed {len(keys)} keys:\n{seeded.stdout}"
        demo = Demo(url=f"http://127.0.0.1:{port}", key=keys[0], log_path=log_path)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                if requests.get(demo.url + "/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"runserver did not start:\n{demo.log()}")
            time.sleep(0.1)
        yield demo
    finally:
        # Before the test database is flushed: the server holds connections to it.
        server.kill()
        server.wait(timeout=10)


def reader_env(demo: Demo, **extra: str) -> dict[str, str]:
    """The reader's shell after docs/api.md's `export`: the demo's address and key. Requests to
    any host but 127.0.0.1 go to a port nobody listens on (curl, httpx and openai honour the
    proxy variables), so nothing reaches the internet."""
    env = {
        name: value for name, value in os.environ.items()
        if not name.startswith(("TREUE_", "OPENAI_"))
        and name.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    nowhere = f"http://127.0.0.1:{free_port()}"
    env.update(
        TREUE_URL=demo.url,
        TREUE_KEY=demo.key,
        HTTP_PROXY=nowhere, HTTPS_PROXY=nowhere, ALL_PROXY=nowhere,
        http_proxy=nowhere, https_proxy=nowhere, all_proxy=nowhere,
        NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
        **extra,
    )
    return env


def _demo_answers() -> dict[str, Answer]:
    return {
        a.external_id: a
        for a in Answer.objects.filter(service__name=DEMO_SERVICE).select_related("use_case")
    }


# --- The tests ---------------------------------------------------------------------------------


def test_the_readme_marks_every_example_that_talks_to_treue():
    text = EXAMPLES.read_text()
    snippets = readme_snippets(text)
    for tag, kind in TAGS.items():
        snippet = tagged(tag)
        assert kind(snippet), f"docs/api.md:{snippet.line}: {tag} marks no such example"
    for snippet in snippets:
        if is_ingest_curl(snippet) or uses_client(snippet):
            assert snippet.tag in TAGS, (
                f"docs/api.md:{snippet.line}: an example that talks to Treue and is not run by "
                f"this test; mark it with one of {sorted(TAGS)} (or a new tag and its test)"
            )
    marks = TAG_RE.findall(text)
    assert sorted(marks) == sorted(s.tag for s in snippets if s.tag), (
        "a readme-test comment that is not right before a fence"
    )
    assert set(marks) <= set(TAGS), f"tags without a test: {set(marks) - set(TAGS)}"
    if not EXPORT_RE.search(text):
        pytest.fail(
            "docs/api.md must tell the reader to `export TREUE_URL=http://127.0.0.1:8000 "
            "TREUE_KEY=<…>`: the examples read both"
        )
    # The README sends its reader there for the examples.
    assert "(docs/api.md)" in README.read_text(), "README.md must link to docs/api.md"
    # Nowhere else in the guide an example that talks to Treue, which this test would not run,
    # nor a mark that tagged() would never look at.
    for page in GUIDE:
        if page == EXAMPLES:
            continue
        name = str(page.relative_to(BASE_DIR))
        other = page.read_text()
        assert not TAG_RE.findall(other), f"{name}: readme-test marks belong in docs/api.md"
        for snippet in readme_snippets(other, name):
            assert not (is_ingest_curl(snippet) or uses_client(snippet)), (
                f"{name}:{snippet.line}: an example that talks to Treue belongs in docs/api.md, "
                "where this test runs it"
            )


@pytest.fixture
def curl() -> str:
    """The curl binary the reader runs; missing, the example cannot be proven (a failure in CI)."""
    path = shutil.which("curl")
    if path is None:
        if IN_CI:
            pytest.fail("curl is missing: the example of docs/api.md needs it")
        pytest.skip("curl is not installed")
    return path


def test_the_curl_example_stores_its_answer_in_the_demo(curl, demo):
    snippet = tagged(CURL_INGEST)
    before = _demo_answers()

    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", snippet.code],
        cwd=BASE_DIR, env=reader_env(demo), stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=SNIPPET_TIMEOUT,
    )

    assert result.returncode == 0, f"{result.stderr}\nserver log:\n{demo.log()}"
    try:
        response = json.loads(result.stdout)
    except ValueError:
        pytest.fail(f"not JSON: {result.stdout!r}\nserver log:\n{demo.log()}")
    assert "errors" not in response, response
    assert {"id", "external_id", "flagged", "sampled"} <= response.keys(), response
    after = _demo_answers()
    assert set(after) - set(before) == {response["external_id"]}
    stored = after[response["external_id"]]
    assert stored.use_case.slug in DEMO_SLUGS
    # What the example sends is what is stored.
    words = shlex.split(snippet.code)
    sent = json.loads(words[words.index("-d") + 1])
    assert stored.external_id == sent["external_id"]
    assert stored.use_case.slug == sent["use_case"]
    assert (stored.question, stored.text, stored.model) == (
        sent["question"], sent["answer"], sent["model"]
    )
    assert [c.text for c in stored.chunks.all()] == [c["text"] for c in sent["chunks"]]
    assert stored.logprobs_status == Answer.LogprobsStatus.OK


def _literals(code: str) -> tuple[set[str], Any]:
    """The snippet's string constants, and the value it passes as treue_metadata."""
    tree = ast.parse(code)
    strings = {
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    metadata = [
        kw.value for node in ast.walk(tree) if isinstance(node, ast.Call)
        for kw in node.keywords if kw.arg == "treue_metadata"
    ]
    assert len(metadata) == 1, "the example passes treue_metadata= once"
    return strings, ast.literal_eval(metadata[0])


def test_the_instrument_example_records_its_rag_loop_in_the_demo(demo, openai_server, tmp_path):
    snippet = tagged(PYTHON_INSTRUMENT)
    for keyword in ("instrument(", "treue_question=", "treue_external_id=", "treue_metadata="):
        assert keyword in snippet.code, f"docs/api.md's example does not show {keyword}"
    strings, metadata = _literals(snippet.code)
    script = tmp_path / "readme_example.py"
    script.write_text(snippet.code)
    env = reader_env(
        demo,
        OPENAI_BASE_URL=openai_server.base_url,
        OPENAI_API_KEY="sk-test-not-a-key",
        # The client as it is in this tree, as `pip install ./clients/python` gives it.
        PYTHONPATH=str(BASE_DIR / "clients" / "python"),
    )

    def run() -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=SNIPPET_TIMEOUT,
        )
        assert result.returncode == 0, f"{result.stderr}\nserver log:\n{demo.log()}"
        return result

    before = _demo_answers()
    result = run()

    calls = list(openai_server.requests)
    assert len(calls) >= 2, f"a RAG loop asks the model more than once: {len(calls)} calls"
    for call in calls:
        assert call.get("logprobs") is True, "instrument() asks for log-probabilities"
        assert not [name for name in call if name.startswith("treue_")], call.keys()
    after = _demo_answers()
    new = {external_id: after[external_id] for external_id in set(after) - set(before)}
    assert len(new) == len(calls), (
        f"{len(calls)} calls, {len(new)} answers stored\n{result.stderr}\n{demo.log()}"
    )
    asked = {call["messages"][-1]["content"]: call for call in calls}
    for external_id, answer in new.items():
        # Each answer is recorded under the id, question and metadata the example gives it:
        # not a random uuid, nor the whole prompt with its sources, nor no metadata.
        assert external_id in strings, f"{external_id!r} is not one of the example's ids"
        assert answer.question in strings, f"{answer.question!r} is not one of its questions"
        prompts = [prompt for prompt in asked if answer.question in prompt]
        assert len(prompts) == 1, (answer.question, list(asked))
        call = asked[prompts[0]]
        assert answer.question != prompts[0]
        assert metadata and answer.metadata == metadata
        assert (answer.text, answer.model) == (DEFAULT_ANSWER, call["model"])
        assert answer.messages == call["messages"]
        assert answer.logprobs_status == Answer.LogprobsStatus.OK
        assert answer.use_case.slug in DEMO_SLUGS
        chunks = [c.text for c in answer.chunks.all()]
        assert len(chunks) >= 2, "the toy retriever returns a couple of passages"
        assert all(chunk in prompts[0] for chunk in chunks)
        assert external_id in result.stdout

    # Run again (the test model answers alike): the same answers, recognised by their ids, are
    # not stored twice, and none is refused.
    openai_server.reset()
    again = run()
    assert len(openai_server.requests) == len(calls)
    assert _demo_answers().keys() == after.keys()
    assert "refused" not in again.stderr, again.stderr


def test_the_instrument_example_runs_against_the_demo_alone(demo, tmp_path):
    """Without a model endpoint of the reader's own: the demo's model server answers RAG
    prompts from their sources as `treue-demo-rag`, as docs/api.md says."""
    from treue_demo.generator import DEMO_RAG_MODEL
    from treue_demo.server import DemoJudgeServer

    snippet = tagged(PYTHON_INSTRUMENT)
    assert f"MODEL={DEMO_RAG_MODEL}" in EXAMPLES.read_text(encoding="utf-8")
    script = tmp_path / "readme_example.py"
    script.write_text(snippet.code)
    server = DemoJudgeServer(port=0, any_port=True)
    server.start()
    try:
        env = reader_env(
            demo, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="demo", MODEL=DEMO_RAG_MODEL,
            PYTHONPATH=str(BASE_DIR / "clients" / "python"),
        )
        before = _demo_answers()
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=SNIPPET_TIMEOUT,
        )
    finally:
        server.stop()
    assert result.returncode == 0, f"{result.stderr}\nserver log:\n{demo.log()}"
    after = _demo_answers()
    new = [after[k] for k in set(after) - set(before)]
    assert len(new) == 2, result.stderr
    for answer in new:
        assert answer.model == DEMO_RAG_MODEL
        assert answer.logprobs_status == Answer.LogprobsStatus.OK
        # The answer is a sentence of the sources the toy retriever gave.
        assert any(answer.text in chunk.text for chunk in answer.chunks.all()), answer.text
