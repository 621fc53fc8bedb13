"""Ingest benchmark: how many answers per second the API stores, against what PostgreSQL allows.

What it measures, on a throw-away PostgreSQL database and a real gunicorn:

* ``single``: N answers posted one per request (``POST /api/v1/answers``) by concurrent client
  threads, each with its own keep-alive ``httpx.Client`` (gunicorn's sync workers close the
  connection after each response, gthread keeps it); answers/s and per-request latency p50/p99;
  every response must be a 201.
* ``batch``: the same number of answers posted in batches (``POST /api/v1/answers/batch``);
  answers/s and per-batch latency p50/p99; every item must come back 201.
* ``keyless`` (not in the default run): the same kind of single-answer bodies posted without a
  key, so gunicorn, Django's middleware and django-ninja answer 401 before any database work:
  what a request costs the web stack alone, which no ingest code can go under; every response
  must be a 401 and nothing may be stored.
* ``direct``: the floor - the same kind of rows (``monitoring_answer`` with its JSON columns
  and 5 ``monitoring_chunk`` rows each) written straight into PostgreSQL with psycopg 3 over
  one connection, in batches, one transaction per batch, by COPY and by ``executemany``.

The answers are generated: ~300-token German or English answers with OpenAI-shaped logprobs
(two top_logprobs per token, tokens concatenating exactly to the text; a share of answers has
low-probability capitalised words or numbers, so tier 1 flags them), 5 retrieved chunks of ~600
characters, a question, a model name and unique external ids. Request bodies are encoded before
the clock starts. The clients run on the same machine as the server, so they take CPU from it.

Each phase also reports CPU milliseconds per answer of gunicorn (master and workers), of the
PostgreSQL backends of the bench database and of this script, and how many cores other processes
kept busy meanwhile: on a shared machine throughput moves with other people's load, CPU per
answer much less, and capacity is about cores / (CPU per answer).

Afterwards it prints a table against the targets (single >= 300 answers/s with p99 <= 50 ms at 8
clients, batch >= 2,000 answers/s, batch at >= 25 % of the direct floor) and checks by counting
rows that every answer sent was stored exactly once, with its 5 chunks.

It creates the database (default ``treue_bench``), migrates it, creates a use case and a service
key with the management commands, starts gunicorn (DEBUG=False, its var directory and the
embedded Celery broker that receives the judge tasks of sampled answers in a temporary
directory), and on exit - also on errors, Ctrl-C, SIGTERM or the overall time limit - stops
gunicorn and drops the database (unless ``--keep``). Run from anywhere, with the project's venv:

    .venv/bin/python bench/ingest.py                       # defaults: 2000 answers a phase
    .venv/bin/python bench/ingest.py --answers 500 --phases single,direct
    .venv/bin/python bench/ingest.py --phases keyless,single   # the stack's share of single
    .venv/bin/python bench/ingest.py --worker-class gthread --workers 4 --threads 2

Exit status: 0 when every answer was stored exactly once (targets missed or not; add
``--strict`` to also fail on a missed target), 1 on errors or failed verification.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

# Run as a script, this folder comes first on sys.path, where bench/statistics.py would
# shadow the standard library's statistics module (Django and this file import it).
_sys.path[0] = str(_Path(__file__).resolve().parents[1])

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from types import FrameType
from typing import Any

import httpx
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Plain Python (no Django): used only to precompute the rows of the direct phase off the clock.
from ingest.domain import logprobs as tier1
from ingest.domain import sampling
from monitoring.domain.compact import pack_compact

TARGET_SINGLE_RATE = 300.0  # answers/s, one answer a request, 8 clients
TARGET_SINGLE_P99_MS = 50.0
TARGET_BATCH_RATE = 2000.0  # answers/s
TARGET_BATCH_SHARE = 0.25  # batch answers/s over the direct floor
CHUNKS_PER_ANSWER = 5
USE_CASE_SLUG = "bench"
SERVICE_NAME = "bench-client"
LOGPROB_THRESHOLD = 0.5  # the use case default; ln(0.5) = -0.69


# --------------------------------------------------------------------------- answer generation

DE_FUNCTION = (
    "der die das und ist nicht wird werden für bei nach über können müssen mit von zu im auf an "
    "als auch es sich sie ein eine einen dem den des oder wenn dass nur noch bis innerhalb ab zur "
    "zum sowie jedoch bereits gemäß spätestens grundsätzlich jeweils hierfür dabei"
).split()
DE_CONTENT = (
    "beantragt eingereicht genehmigt erstattet gilt beträgt erforderlich zuständig schriftlich "
    "rechtzeitig vollständig maximal zusätzlich entsprechend vorgesehen möglich elektronisch "
    "abgestimmt nachgewiesen übernommen ausgezahlt berücksichtigt"
).split()
DE_NOUNS = (
    "Antrag Urlaubsanspruch Kündigungsfrist Arbeitsvertrag Arbeitgeber Abteilung Erstattung "
    "Reisekosten Genehmigung Formular Frist Monate Tage Personalabteilung Betriebsrat Vorgesetzte "
    "Homeoffice Gehalt Überstunden Behältergröße Gefahrstoffverordnung Sicherheitsdatenblatt "
    "Lagerung Prüfung Mitarbeitende Richtlinie Zeiterfassung Elternzeit Krankmeldung Dienstreise "
    "Arbeitsunfähigkeitsbescheinigung Übernachtung Pauschale Beleg Kostenstelle Freigabe Schulung "
    "Zertifikat Workday SAP Intranet"
).split()
EN_FUNCTION = (
    "the a and is are not will be for with to of in on at by within after before must can may "
    "should this that it as or if only from up per each any"
).split()
EN_CONTENT = (
    "employees request submitted approved reimbursed applies amounts required responsible "
    "written timely complete maximum additional corresponding possible electronically agreed "
    "manager approval policy travel expenses notice period contract department allowance receipt"
).split()
EN_NOUNS = (
    "HR Workday SAP Concur Intranet Travel Policy Works Council Germany Munich Berlin Monday "
    "January Finance Payroll"
).split()
NUMBERS = ("14", "30", "3,5", "2026", "100", "0,30", "§ 4", "12.000", "24", "6", "2,5", "§ 15")
SOURCES = (
    "handbuch/personal/urlaub.pdf", "handbuch/personal/reisekosten.pdf",
    "richtlinien/gefahrstoffe/lagerung.docx", "intranet/hr/faq.html",
    "policies/travel-policy-2026.pdf", "vertraege/muster-arbeitsvertrag.pdf",
)
MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4.1-mini-2025-04-14", "gpt-4o-2024-08-06")
QUESTIONS_DE = (
    "Wie viele Tage Urlaub stehen mir nach {n} Monaten zu?",
    "Welche Frist gilt für die Erstattung von Reisekosten nach einer Dienstreise?",
    "Bis wann muss ich die Krankmeldung bei der Personalabteilung einreichen?",
    "Welche Behältergröße ist für die Lagerung laut Gefahrstoffverordnung zulässig?",
    "Wer genehmigt Überstunden in meiner Abteilung, und wie werden sie erfasst?",
)
QUESTIONS_EN = (
    "How many days of leave do I get after {n} months?",
    "What is the deadline for submitting travel expenses after a business trip?",
    "Who approves overtime in my department and how is it recorded?",
)


@dataclass(slots=True)
class Token:
    text: str
    word_start: bool  # the first token of a word
    content: bool  # that word starts with a capital, a digit or "§" (tier 1 looks at it)
    logprob: float = 0.0


def _number_tokens(number: str) -> list[str]:
    """Numbers as OpenAI's tokenizers cut them: groups of up to 3 digits, separators apart."""
    if number.startswith("§"):
        return ["§", " " + number[2:]]
    out: list[str] = []
    for part in re.split(r"([.,])", number):
        if part in (".", ","):
            out.append(part)
        else:
            out += [part[i : i + 3] for i in range(0, len(part), 3)]
    return out


_PIECES: dict[str, list[str]] = {}


def _word_tokens(word: str, rng: Random) -> list[str]:
    """BPE-like pieces of a word, the same for every occurrence (as a tokenizer's): numbers in
    digit groups, words over 7 characters in 2-3 pieces of at least 3 characters."""
    pieces = _PIECES.get(word)
    if pieces is None:
        if word[0].isdigit() or word[0] == "§":
            pieces = _number_tokens(word)
        elif len(word) <= 7:
            pieces = [word]
        elif len(word) <= 12:
            cut = rng.randint(3, len(word) - 3)
            pieces = [word[:cut], word[cut:]]
        else:
            first = rng.randint(3, len(word) // 2)
            second = rng.randint(first + 3, len(word) - 3)
            pieces = [word[:first], word[first:second], word[second:]]
        _PIECES[word] = pieces
    return pieces


def _sentence_words(rng: Random, german: bool) -> list[str]:
    function, content, nouns = (
        (DE_FUNCTION, DE_CONTENT, DE_NOUNS) if german else (EN_FUNCTION, EN_CONTENT, EN_NOUNS)
    )
    words = []
    for _ in range(rng.randint(8, 16)):
        roll = rng.random()
        if roll < 0.45:
            words.append(rng.choice(function))
        elif roll < 0.72:
            words.append(rng.choice(content))
        elif roll < 0.93:
            words.append(rng.choice(nouns))
        else:
            words.append(rng.choice(NUMBERS))
    words[0] = words[0][0].upper() + words[0][1:]
    return words


def _prose(rng: Random, german: bool, min_chars: int) -> str:
    sentences = []
    length = 0
    while length < min_chars:
        words = _sentence_words(rng, german)
        if len(words) > 6 and rng.random() < 0.4:
            words[4] += ","
        sentence = " ".join(words) + "."
        sentences.append(sentence)
        length += len(sentence) + 1
    return " ".join(sentences)


def make_answer_tokens(rng: Random, german: bool, n_tokens: int, flag: bool) -> list[Token]:
    """Tokens that spell an answer of about ``n_tokens`` tokens, with their log-probabilities."""
    tokens: list[Token] = []
    sentences = 0
    while len(tokens) < n_tokens:
        words = _sentence_words(rng, german)
        for w_index, word in enumerate(words):
            first = word[0]
            content = first.isupper() or first.isdigit() or first == "§"
            for p_index, piece in enumerate(_word_tokens(word, rng)):
                lead = " " if p_index == 0 and tokens and tokens[-1].text != "\n\n" else ""
                text = lead + piece if p_index == 0 else piece
                tokens.append(Token(text, p_index == 0, content))
            if w_index == 4 and len(words) > 6 and rng.random() < 0.4:
                tokens.append(Token(",", False, False))
        tokens.append(Token(".", False, False))
        sentences += 1
        if sentences % rng.randint(3, 5) == 0 and len(tokens) < n_tokens:
            tokens.append(Token("\n\n", False, False))
    # Confident on the whole: p >= 0.64 for every token, most near 1.
    for token in tokens:
        token.logprob = -min(rng.expovariate(1 / 0.05), 0.45)
    # Some unsure function words: tier 1 ignores words that do not start with a capital/digit.
    lowercase = [t for t in tokens if t.word_start and not t.content]
    for token in rng.sample(lowercase, k=max(1, len(lowercase) // 30)):
        token.logprob = -rng.uniform(0.8, 2.5)
    if flag:
        candidates = [t for t in tokens if t.word_start and t.content]
        for token in rng.sample(candidates, k=min(len(candidates), rng.randint(1, 3))):
            token.logprob = -rng.uniform(0.9, 3.5)
    return tokens


# Runner-up tokens of top_logprobs: word beginnings, drawn from a fixed pool (fast to generate).
ALTERNATIVES = {
    german: sorted({" " + w[:n] for w in words for n in range(3, 9)})
    for german, words in ((True, DE_NOUNS + DE_CONTENT), (False, EN_NOUNS + EN_CONTENT))
}


def openai_logprobs(tokens: Sequence[Token], rng: Random, german: bool) -> dict[str, Any]:
    """``choices[0].logprobs`` as OpenAI sends it with ``top_logprobs=2``."""
    content = []
    alternatives = ALTERNATIVES[german]
    for token in tokens:
        lp = round(token.logprob, 8)
        alt_p = max(1e-9, (1.0 - math.exp(lp)) * (0.3 + 0.6 * rng.random()))
        alt = alternatives[int(rng.random() * len(alternatives))]
        raw = list(token.text.encode())
        content.append({
            "token": token.text,
            "logprob": lp,
            "bytes": raw,
            "top_logprobs": [
                {"token": token.text, "logprob": lp, "bytes": raw},
                {"token": alt, "logprob": round(math.log(alt_p), 8), "bytes": list(alt.encode())},
            ],
        })
    return {"content": content, "refusal": None}


class Corpus:
    """The documents chunks come from: retrieval returns the same chunks for many questions."""

    def __init__(self, rng: Random, size: int = 300) -> None:
        self.chunks = {
            german: [
                (_prose(rng, german, 560)[:620], f"doc-{rng.randint(1000, 9999)}#c{i}",
                 rng.choice(SOURCES))
                for i in range(size)
            ]
            for german in (True, False)
        }


def make_answer(
    rng: Random, corpus: Corpus, external_id: str, flag_share: float
) -> dict[str, Any]:
    """One answer as a RAG service would send it to ``POST /api/v1/answers``."""
    german = rng.random() < 0.7
    tokens = make_answer_tokens(rng, german, rng.randint(270, 330), rng.random() < flag_share)
    question = rng.choice(QUESTIONS_DE if german else QUESTIONS_EN).format(n=rng.randint(3, 36))
    scores = sorted((round(rng.uniform(0.45, 0.93), 4) for _ in range(CHUNKS_PER_ANSWER)),
                    reverse=True)
    chunks = [
        {"text": text, "id": chunk_id, "score": score, "source": source}
        for (text, chunk_id, source), score in zip(
            rng.sample(corpus.chunks[german], CHUNKS_PER_ANSWER), scores, strict=True
        )
    ]
    return {
        "external_id": external_id,
        "use_case": USE_CASE_SLUG,
        "question": question,
        "answer": "".join(t.text for t in tokens),
        "model": rng.choice(MODELS),
        "chunks": chunks,
        "logprobs": openai_logprobs(tokens, rng, german),
        "metadata": {"session": secrets.token_hex(8), "channel": rng.choice(["web", "teams"])},
    }


def encode(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


# --------------------------------------------------------------------------------- processes


class BenchError(Exception):
    pass


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _raise_timeout(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("the overall time limit (--time-limit) ran out")


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """For the clean-up, which is bounded by timeouts: a second Ctrl-C (or `timeout`, which
    signals the process and then its group) must not cut it short."""
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def clean_up(
    *, server: Any, meter: Any, created: bool, keep: bool, pg: str, db: str,
    var_dir: tempfile.TemporaryDirectory[str],
) -> None:
    """What a bench run leaves behind, whatever ended it: its server and CPU meter stopped, its
    database dropped (unless kept) and its var folder removed, with the time limit off and
    signals ignored so that nothing cuts the clean-up short."""
    signal.alarm(0)
    with _signals_ignored():
        if server is not None:
            server.stop()
            server.log.close()
        if meter is not None:
            meter.close()
        if created and not keep:
            drop_database(pg, db)
            print(f"dropped database {db}", flush=True)
        elif created:
            print(f"kept database {db}", flush=True)
        var_dir.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    """Run a management command; its stdout, or BenchError with its output."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=timeout, check=False,
    )
    if result.returncode != 0:
        raise BenchError(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    log: Any  # the temporary file gunicorn writes its log to
    url: str

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        self.log.seek(0)
        return "\n".join(self.log.read().decode(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # gunicorn's master stops its workers gracefully on SIGTERM
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: only its workers
                self.proc.wait(timeout=5)


def start_server(args: argparse.Namespace, env: dict[str, str]) -> Server:
    port = args.port or free_port()
    cmd = [
        sys.executable, "-m", "gunicorn", "treue_site.wsgi",
        "-w", str(args.workers), "--threads", str(args.threads),
        "--worker-class", args.worker_class, "-b", f"127.0.0.1:{port}",
        "--timeout", "60", "--graceful-timeout", "5", "--keep-alive", "5",
        "--log-level", "warning",
    ]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    server = Server(proc, log, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"gunicorn exited with {proc.returncode}:\n{server.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                    return server
            time.sleep(0.2)
        raise BenchError(f"gunicorn did not answer /health within 60 s:\n{server.log_tail()}")
    except BaseException:  # also Ctrl-C while it starts: the caller has no server to stop
        with _signals_ignored():
            server.stop()
            log.close()
        raise


# --------------------------------------------------------------------------------- database


def admin_connect(pg: str) -> psycopg.Connection[Any]:
    return psycopg.connect(f"{pg}/postgres", autocommit=True, connect_timeout=10)


def create_database(pg: str, name: str, replace: bool) -> None:
    with admin_connect(pg) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and not replace:
            raise BenchError(f"database {name} exists; pass --replace to drop and recreate it")
        if exists:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(pg: str, name: str) -> None:
    with admin_connect(pg) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, connect_timeout=10, options="-c statement_timeout=120000")


# ------------------------------------------------------------------------------- CPU meter

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [0] is field 3 (state)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _proc_cpu(pid: int) -> float | None:
    fields = _proc_stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _children(parent: int) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _proc_stat(entry.name)
            if fields is not None and fields[1] == str(parent):
                out.append(int(entry.name))
    return out


def _machine_cpu() -> float:
    """CPU seconds all processes have used, over all cores (user, system, irq, steal)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


@dataclass
class CpuUse:
    seconds: dict[str, float]  # CPU seconds per group: "server", "postgres", "client"
    others: float  # CPU seconds of every other process on the machine (other users' too)


class CpuMeter:
    """CPU time of gunicorn (master and workers), of the PostgreSQL backends serving the bench
    database and of this script, so that figures from a busy shared machine can be read.

    Between start() and stop() a thread samples every second: Django reconnects every
    CONN_MAX_AGE seconds, and the CPU of a backend that has gone is only known from before.
    """

    def __init__(self, db_url: str) -> None:
        self.conn = psycopg.connect(db_url, autocommit=True, connect_timeout=10)
        self.server_pid: int | None = None
        self._first: dict[str, dict[int, float]] = {}
        self._last: dict[str, dict[int, float]] = {}
        self._machine = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def close(self) -> None:
        self.stop()
        self.conn.close()

    def _sample(self) -> dict[str, dict[int, float]]:
        groups: dict[str, dict[int, float]] = {"client": {0: time.process_time()}}
        server = [self.server_pid, *_children(self.server_pid)] if self.server_pid else []
        backends = [r[0] for r in self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )]
        for group, pids in (("server", server), ("postgres", backends)):
            cpu = {pid: _proc_cpu(pid) for pid in pids}
            groups[group] = {pid: value for pid, value in cpu.items() if value is not None}
        return groups

    def _record(self) -> None:
        for group, pids in self._sample().items():
            self._last.setdefault(group, {}).update(pids)

    def _poll(self) -> None:
        while not self._stop.wait(1.0):
            self._record()

    def start(self) -> None:
        self._first = self._sample()
        self._last = {group: dict(pids) for group, pids in self._first.items()}
        self._machine = _machine_cpu()
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def stop(self) -> CpuUse:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=10)
            self._thread = None
        self._record()
        # A process that started in between counts from zero.
        seconds = {
            group: sum(value - self._first.get(group, {}).get(pid, 0.0)
                       for pid, value in pids.items())
            for group, pids in self._last.items()
        }
        others = max(0.0, _machine_cpu() - self._machine - sum(seconds.values()))
        return CpuUse(seconds, others)


# --------------------------------------------------------------------------------- HTTP phases


@dataclass
class PhaseResult:
    name: str
    answers: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    bad: int = 0  # answers not stored with a 201 (an HTTP error, another status, a failed item)
    problems: list[str] = field(default_factory=list)
    flagged: int = 0
    cpu: CpuUse | None = None

    @property
    def rate(self) -> float:
        return self.answers / self.seconds if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return math.nan
        ordered = sorted(self.latencies_ms)
        return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def run_clients(
    bodies: Sequence[bytes],
    clients: int,
    send: Callable[[httpx.Client, bytes], tuple[int, bytes]],
    client_factory: Callable[[], httpx.Client],
    deadline: float,
    meter: CpuMeter,
) -> tuple[float, list[tuple[int, int, float, bytes]], CpuUse]:
    """Post ``bodies`` from ``clients`` threads, each taking the next body when it is free.

    Returns the wall time and (index, status, latency in ms, response body) per request; status
    0 is a transport error (timeout, refused connection), with the error as the body.
    """
    results: list[tuple[int, int, float, bytes]] = []
    lock = threading.Lock()
    next_index = iter(range(len(bodies)))
    start = threading.Barrier(clients + 1)
    stop = threading.Event()

    def worker() -> None:
        with client_factory() as client:
            start.wait()
            while not stop.is_set() and time.monotonic() < deadline:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                t0 = time.perf_counter()
                try:
                    status, content = send(client, bodies[i])
                except httpx.HTTPError as e:
                    status, content = 0, f"{type(e).__name__}: {e}".encode()
                elapsed = (time.perf_counter() - t0) * 1000
                with lock:
                    results.append((i, status, elapsed, content))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    meter.start()
    start.wait(timeout=30)
    t0 = time.perf_counter()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    finally:
        stop.set()
    seconds = time.perf_counter() - t0
    return seconds, results, meter.stop()


def _client_factory(url: str, key: str | None,
                    read_timeout: float) -> Callable[[], httpx.Client]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"

    def make() -> httpx.Client:
        return httpx.Client(base_url=url, headers=headers,
                            timeout=httpx.Timeout(read_timeout, connect=5))

    return make


def _post(path: str) -> Callable[[httpx.Client, bytes], tuple[int, bytes]]:
    def send(client: httpx.Client, body: bytes) -> tuple[int, bytes]:
        response = client.post(path, content=body)
        return response.status_code, response.content

    return send


def phase_single(
    name: str, payloads: Sequence[dict[str, Any]], url: str, key: str | None, clients: int,
    deadline: float, meter: CpuMeter,
) -> PhaseResult:
    """One answer a request; without a key (``keyless``) every answer must come back 401."""
    expected = 201 if key is not None else 401
    bodies = [encode(p) for p in payloads]
    seconds, rows, cpu = run_clients(
        bodies, clients, _post("/api/v1/answers"), _client_factory(url, key, 30), deadline, meter
    )
    result = PhaseResult(name, len(rows), seconds, [r[2] for r in rows], cpu=cpu)
    result.bad = len(payloads) - len(rows)  # not sent before the deadline
    if result.bad:
        result.problems.append(f"{result.bad} answers not sent before the phase deadline")
    for _, status, _, content in rows:
        if status != expected:
            result.bad += 1
            if len(result.problems) < 5:
                result.problems.append(f"status {status}: {content[:300]!r}")
        elif expected == 201 and json.loads(content)["flagged"]:
            result.flagged += 1
    return result


def phase_batch(
    payloads: Sequence[dict[str, Any]], url: str, key: str, clients: int, batch_size: int,
    deadline: float, meter: CpuMeter,
) -> PhaseResult:
    batches = [payloads[i : i + batch_size] for i in range(0, len(payloads), batch_size)]
    bodies = [encode({"answers": list(b)}) for b in batches]
    seconds, rows, cpu = run_clients(
        bodies, clients, _post("/api/v1/answers/batch"), _client_factory(url, key, 120),
        deadline, meter,
    )
    sent = sum(len(batches[i]) for i, *_ in rows)
    result = PhaseResult("batch", sent, seconds, [r[2] for r in rows], cpu=cpu)
    result.bad = len(payloads) - sent
    if result.bad:
        result.problems.append(f"{result.bad} answers not sent before the phase deadline")
    for i, status, _, content in rows:
        if status != 200:
            result.bad += len(batches[i])
            result.problems.append(f"batch {i}: status {status}: {content[:300]!r}")
            continue
        items = json.loads(content)["results"]
        for item in items:
            if item["status"] != 201:
                result.bad += 1
                if len(result.problems) < 5:
                    result.problems.append(f"batch {i} item {item['index']}: {item}")
            elif item["answer"]["flagged"]:
                result.flagged += 1
        result.bad += len(batches[i]) - len(items)
    return result


# ------------------------------------------------------------------------------ direct phase

CHUNK_COLUMNS = ("rank", "text", "score", "source_chunk_id", "source")


@dataclass
class Setup:
    db_url: str
    env: dict[str, str]
    key: str
    service_id: int
    use_case_id: int
    sample_rate: float
    chunk_columns: tuple[str, ...] = ("answer_id", "answer_created_at", *CHUNK_COLUMNS)

JSON_COLUMNS = {"messages", "metadata", "uncertain_tokens"}
# Printed by `manage.py shell -c`: the models' defaults, for NOT NULL columns that the bench does
# not compute itself (added by later migrations, e.g. the judge's), so the direct rows stay valid.
MODEL_DEFAULTS = """
import json
from monitoring.models import Answer, Chunk
out = {}
for model in (Answer, Chunk):
    fields = [f for f in model._meta.concrete_fields if f.has_default()]
    out[model._meta.db_table] = {
        f.column: f.get_default() for f in fields
        if isinstance(f.get_default(), bool | int | float | str | list | dict)
    }
print(json.dumps(out))
"""


def content_hash(raw: Any) -> str:
    """A SHA-256 fingerprint like monitoring.services.content_hash (which needs Django)."""
    canonical = json.dumps(raw, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class DirectRow:
    answer: dict[str, Any]  # column -> value, JSON columns as Python objects
    chunks: list[tuple[Any, ...]]  # CHUNK_COLUMNS, then the chunk table's extra columns


def extra_columns(setup: Setup, known: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
    """Per table, the NOT NULL columns without a database default that ``known`` lacks, with
    the model's default; BenchError for one the model gives no default either."""
    defaults = json.loads(manage(setup.env, "shell", "-c", MODEL_DEFAULTS).splitlines()[-1])
    with connect(setup.db_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_name = ANY(%s) AND is_nullable = 'NO' AND column_default IS NULL"
            " AND is_identity = 'NO'", (list(known),)
        ).fetchall()
    extra: dict[str, dict[str, Any]] = {table: {} for table in known}
    for table, column, data_type in rows:
        if column in known[table]:
            continue
        if column not in defaults.get(table, {}):
            raise BenchError(f"{table}.{column} is NOT NULL and has no default: teach "
                             "direct_rows() in bench/ingest.py to fill it")
        value = defaults[table][column]
        extra[table][column] = Jsonb(value) if data_type in ("json", "jsonb") else value
    return extra


def direct_rows(payloads: Sequence[dict[str, Any]], setup: Setup) -> list[DirectRow]:
    """The rows the API would write for these answers: tier 1, the sampling decision, a hash."""
    rows = []
    for p in payloads:
        lp = {"content": [{k: t[k] for k in ("token", "logprob", "bytes")}
                          for t in p["logprobs"]["content"]]}
        result = tier1.analyse_answer(p["answer"], lp, LOGPROB_THRESHOLD)
        decision = sampling.decide(service_key=str(setup.service_id),
                                   external_id=p["external_id"], flagged=result.flagged,
                                   rate=setup.sample_rate)
        answer = {
            "use_case_id": setup.use_case_id, "service_id": setup.service_id,
            "external_id": p["external_id"], "content_hash": content_hash(p),
            "question": p["question"], "text": p["answer"], "model": p["model"],
            "messages": None, "metadata": p["metadata"],
            "logprobs_status": result.logprobs_status,
            "token_data": None if result.compact is None else pack_compact(result.compact),
            "logprob_threshold": LOGPROB_THRESHOLD, "flagged": result.flagged,
            "uncertain_tokens": [
                {"token": w.word, "probability": w.probability, "position": w.start,
                 "end": w.end}
                for w in result.uncertain
            ],
            "in_random_sample": decision.in_random_sample, "sampled": decision.sampled,
            "sample_reason": decision.reason,
            "inclusion_probability": decision.inclusion_probability,
            "status": "queued" if decision.sampled else "not_sampled",
            "chunk_count": len(p["chunks"]),
            "best_chunk_score": max(c["score"] for c in p["chunks"]),
        }
        chunks = [(rank, c["text"], c["score"], c["id"], c["source"])
                  for rank, c in enumerate(p["chunks"], start=1)]
        rows.append(DirectRow(answer, chunks))
    if not rows:
        return rows
    extra = extra_columns(setup, {
        "monitoring_answer": {"id", "created_at", "received_at", *rows[0].answer},
        "monitoring_chunk": {"id", "answer_id", "answer_created_at", *CHUNK_COLUMNS},
    })
    chunk_extra = tuple(extra["monitoring_chunk"].values())
    for table, columns in extra.items():
        if columns:
            print(f"  {table}: model defaults for {', '.join(columns)}")
    for row in rows:
        row.answer.update(extra["monitoring_answer"])
        row.chunks = [(*chunk, *chunk_extra) for chunk in row.chunks]
    setup.chunk_columns = ("answer_id", "answer_created_at", *CHUNK_COLUMNS,
                           *extra["monitoring_chunk"])
    return rows


def _answer_values(row: DirectRow, now: Any) -> tuple[Any, ...]:
    return (
        *(Jsonb(v) if k in JSON_COLUMNS and v is not None else v for k, v in row.answer.items()),
        now, now,
    )


def _columns(names: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(map(sql.Identifier, names))


def _insert_copy(
    cur: psycopg.Cursor[Any], batch: Sequence[DirectRow], now: Any, chunk_columns: Sequence[str]
) -> None:
    ids = [r[0] for r in cur.execute(
        "SELECT nextval(pg_get_serial_sequence('monitoring_answer', 'id'))"
        " FROM generate_series(1, %s)", (len(batch),)
    ).fetchall()]
    columns = _columns(("id", *batch[0].answer, "created_at", "received_at"))
    with cur.copy(sql.SQL("COPY monitoring_answer ({}) FROM STDIN").format(columns)) as copy:
        for answer_id, row in zip(ids, batch, strict=True):
            copy.write_row((answer_id, *_answer_values(row, now)))
    query = sql.SQL("COPY monitoring_chunk ({}) FROM STDIN").format(_columns(chunk_columns))
    with cur.copy(query) as copy:
        for answer_id, row in zip(ids, batch, strict=True):
            for chunk in row.chunks:
                copy.write_row((answer_id, now, *chunk))
    with cur.copy(sql.SQL("COPY monitoring_answerkey ({}) FROM STDIN").format(
            _columns(KEY_COLUMNS))) as copy:
        for answer_id, row in zip(ids, batch, strict=True):
            copy.write_row(_key(answer_id, row, now))


def _insert_executemany(
    cur: psycopg.Cursor[Any], batch: Sequence[DirectRow], now: Any, chunk_columns: Sequence[str]
) -> None:
    names = (*batch[0].answer, "created_at", "received_at")
    query = sql.SQL("INSERT INTO monitoring_answer ({}) VALUES ({}) RETURNING id").format(
        _columns(names), sql.SQL(", ").join(sql.Placeholder() * len(names))
    )
    cur.executemany(query, [_answer_values(r, now) for r in batch], returning=True)
    ids = []
    while True:
        ids.append(cur.fetchone()[0])  # type: ignore[index]
        if not cur.nextset():
            break
    query = sql.SQL("INSERT INTO monitoring_chunk ({}) VALUES ({})").format(
        _columns(chunk_columns), sql.SQL(", ").join(sql.Placeholder() * len(chunk_columns))
    )
    cur.executemany(query, [(answer_id, now, *chunk)
                            for answer_id, row in zip(ids, batch, strict=True)
                            for chunk in row.chunks])
    query = sql.SQL("INSERT INTO monitoring_answerkey ({}) VALUES ({})").format(
        _columns(KEY_COLUMNS), sql.SQL(", ").join(sql.Placeholder() * len(KEY_COLUMNS))
    )
    cur.executemany(query, [_key(answer_id, row, now)
                            for answer_id, row in zip(ids, batch, strict=True)])


# Ingest's idempotency key, written beside each answer as the product does.
KEY_COLUMNS = ("service_id", "external_id", "answer_id", "answer_created_at")


def _key(answer_id: int, row: DirectRow, now: Any) -> tuple[Any, ...]:
    return (row.answer["service_id"], row.answer["external_id"], answer_id, now)


def phase_direct(
    name: str, setup: Setup, rows: Sequence[DirectRow], batch_size: int, method: str,
    meter: CpuMeter,
) -> PhaseResult:
    insert = _insert_copy if method == "copy" else _insert_executemany
    with connect(setup.db_url) as conn, conn.cursor() as cur:
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        conn.commit()
        meter.start()
        t0 = time.perf_counter()
        latencies = []
        for i in range(0, len(rows), batch_size):
            b0 = time.perf_counter()
            with conn.transaction():
                insert(cur, rows[i : i + batch_size], now, setup.chunk_columns)
            latencies.append((time.perf_counter() - b0) * 1000)
        seconds = time.perf_counter() - t0
        cpu = meter.stop()
    return PhaseResult(name, len(rows), seconds, latencies, cpu=cpu)


# ------------------------------------------------------------------------------- verification


def verify(db_url: str, service_id: int, expected: dict[str, Sequence[str]]) -> list[str]:
    """Every expected external id stored exactly once with its chunks; problems, else []."""
    problems = []
    with connect(db_url) as conn:
        rows = conn.execute(
            "SELECT a.external_id, a.chunk_count, count(c.id) FROM monitoring_answer a"
            " LEFT JOIN monitoring_chunk c ON c.answer_id = a.id WHERE a.service_id = %s"
            # (id, external_id, chunk_count): partitioned answers have no key of the id alone
            " GROUP BY a.id, a.external_id, a.chunk_count", (service_id,)
        ).fetchall()
    stored: dict[str, int] = {}
    for external_id, _, _ in rows:
        stored[external_id] = stored.get(external_id, 0) + 1
    chunks = {r[0]: (r[1], r[2]) for r in rows}
    for phase, ids in expected.items():
        missing = [i for i in ids if i not in stored]
        twice = [i for i in ids if stored.get(i, 0) > 1]
        bad_chunks = [i for i in ids if i in chunks and chunks[i] != (CHUNKS_PER_ANSWER,) * 2]
        if missing or twice or bad_chunks:
            problems.append(f"{phase}: {len(missing)} missing, {len(twice)} stored twice, "
                            f"{len(bad_chunks)} without exactly {CHUNKS_PER_ANSWER} chunks")
    sent = {i for ids in expected.values() for i in ids}
    extra = [i for i in stored if i not in sent]
    if extra:
        problems.append(f"{len(extra)} stored answers that were never sent, e.g. {extra[0]}")
    with connect(db_url) as conn:
        judged = conn.execute("SELECT to_regclass('monitoring_judgerun')").fetchone()
        if judged is not None and judged[0] is not None:
            # Ingest creates a judge run per sampled answer (the direct rows have none).
            sampled, runs = conn.execute(
                "SELECT count(DISTINCT a.id), count(r.id) FROM monitoring_answer a"
                " LEFT JOIN monitoring_judgerun r ON r.answer_id = a.id"
                " WHERE a.service_id = %s AND a.sampled AND a.external_id NOT LIKE %s",
                (service_id, "%-direct-%"),
            ).fetchone() or (0, 0)
            print(f"verify: {runs} judge runs for {sampled} sampled answers sent over HTTP")
    total = sum(len(ids) for ids in expected.values())
    print(f"verify: {len(rows)} answer rows for {total} answers sent, "
          f"{sum(c for _, c in chunks.values())} chunk rows"
          + ("; every answer stored exactly once with its chunks" if not problems else ""))
    return problems


# ------------------------------------------------------------------------------------ report


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:,.{digits}f}"


def summary(results: dict[str, PhaseResult], clients: int) -> bool:
    """Print the table against the targets; True when every measured target is met."""
    rows: list[tuple[str, str, str, str]] = []

    def check(label: str, value: float, target: str, ok: bool, digits: int = 1) -> None:
        rows.append((label, _fmt(value, digits), target, "PASS" if ok else "MISS"))

    if keyless := results.get("keyless"):
        check("keyless: answers not 401", keyless.bad, "= 0", keyless.bad == 0, 0)
    single = results.get("single")
    if single:
        check(f"single: answers/s ({clients} clients)", single.rate,
              f">= {TARGET_SINGLE_RATE:,.0f}", single.rate >= TARGET_SINGLE_RATE)
        rows.append(("single: p50 latency ms", _fmt(single.percentile(50)), "", ""))
        check("single: p99 latency ms", single.percentile(99), f"<= {TARGET_SINGLE_P99_MS:.0f}",
              single.percentile(99) <= TARGET_SINGLE_P99_MS)
        check("single: answers not 201", single.bad, "= 0", single.bad == 0, 0)
    batch = results.get("batch")
    if batch:
        check("batch: answers/s", batch.rate, f">= {TARGET_BATCH_RATE:,.0f}",
              batch.rate >= TARGET_BATCH_RATE)
        rows.append(("batch: p50 / p99 ms per batch",
                     f"{_fmt(batch.percentile(50))} / {_fmt(batch.percentile(99))}", "", ""))
        check("batch: answers not 201", batch.bad, "= 0", batch.bad == 0, 0)
    directs = [r for n, r in results.items() if n.startswith("direct")]
    for r in directs:
        rows.append((f"{r.name}: answers/s", _fmt(r.rate), "", ""))
    if batch and directs:
        floor = max(directs, key=lambda r: r.rate)
        share = batch.rate / floor.rate
        check(f"batch / {floor.name}", share * 100, f">= {TARGET_BATCH_SHARE:.0%}",
              share >= TARGET_BATCH_SHARE)
        rows[-1] = (rows[-1][0], rows[-1][1] + " %", *rows[-1][2:])
    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'measure':<{width}}  {'value':>13}  {'target':>9}  result")
    for label, value, target, verdict in rows:
        print(f"{label:<{width}}  {value:>13}  {target:>9}  {verdict}")
    return all(r[3] != "MISS" for r in rows)


def print_phase(r: PhaseResult, unit: str) -> None:
    line = (f"{r.name}: {r.answers} answers in {r.seconds:.2f} s = {r.rate:,.1f} answers/s; "
            f"{unit} p50 {_fmt(r.percentile(50))} ms, p99 {_fmt(r.percentile(99))} ms")
    if r.name == "keyless":
        line += f"; {r.bad} not answered 401"
    elif not r.name.startswith("direct"):
        line += f"; {r.bad} not stored with 201; {r.flagged} flagged by tier 1"
    print(line, flush=True)
    if r.cpu is not None and r.answers:
        per = {g: f"{s / r.answers * 1000:.2f}" for g, s in r.cpu.seconds.items()}
        print(f"  CPU ms per answer: gunicorn {per['server']}, postgres backends "
              f"{per['postgres']}, this script {per['client']}; other processes kept "
              f"{r.cpu.others / r.seconds:.2f} of {os.cpu_count()} cores busy", flush=True)
    for problem in r.problems[:5]:
        print(f"  ! {problem}")


# -------------------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--answers", type=int, default=2000, help="answers in each phase")
    parser.add_argument("--phases", default="single,batch,direct",
                        help="comma-separated subset of keyless,single,batch,direct")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients, single")
    parser.add_argument("--batch-clients", type=int, default=2, help="concurrent clients, batch")
    parser.add_argument("--batch-size", type=int, default=100, help="answers per batch (<= 500)")
    parser.add_argument("--direct-method", choices=["copy", "executemany", "both"],
                        default="both", help="how the direct phase inserts")
    parser.add_argument("--warmup", type=int, default=64,
                        help="answers posted one by one before the clock starts (imports, "
                        "connections)")
    parser.add_argument("--flag-share", type=float, default=0.2,
                        help="share of answers with low-probability capitalised words/numbers")
    # Tried on 2 cores: sync with 2, 4 and 6 workers, gthread 2x4 and 4x2. Throughput differed
    # less than the noise of the shared machine; sync 4 used the least CPU per answer (single
    # about 32 ms against 34-39 for gthread 4x2, batches 7-9 against 10-11).
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker")
    parser.add_argument("--worker-class", default="sync", help="gunicorn worker class "
                        "(sync with --threads > 1 runs as gthread)")
    parser.add_argument("--port", type=int, default=0, help="gunicorn port (0: a free one)")
    parser.add_argument("--broker-url", default="",
                        help="Celery broker for the judge tasks that ingest publishes (default: "
                        "the embedded SQLite broker in a temporary directory)")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432",
                        help="PostgreSQL server URL, without the database")
    parser.add_argument("--db", default="treue_bench", help="name of the bench database")
    parser.add_argument("--replace", action="store_true",
                        help="drop the bench database first if it exists")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated answers")
    parser.add_argument("--phase-timeout", type=float, default=300, help="seconds per phase")
    parser.add_argument("--time-limit", type=int, default=1200,
                        help="seconds for the whole run; then it cleans up and fails")
    parser.add_argument("--strict", action="store_true", help="exit 2 when a target is missed")
    args = parser.parse_args(argv)
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if unknown := set(args.phases) - {"keyless", "single", "batch", "direct"}:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.db):
        parser.error("--db must be a plain lower-case PostgreSQL name")
    if not 1 <= args.batch_size <= 500:
        parser.error("--batch-size must be 1..500")
    return args


@contextlib.contextmanager
def signals_handled(time_limit: int) -> Iterator[None]:
    """Ctrl-C, SIGTERM and the time limit all unwind through the cleanup."""
    previous = {s: signal.signal(s, h) for s, h in
                ((signal.SIGTERM, _raise_interrupt), (signal.SIGALRM, _raise_timeout))}
    signal.alarm(time_limit)
    try:
        yield
    finally:
        signal.alarm(0)
        for s, h in previous.items():
            signal.signal(s, h)


def prepare_database(args: argparse.Namespace, var_dir: str) -> Setup:
    """Migrate the fresh database, create the use case and the service key as an admin would.

    The server's var directory (and so the embedded broker's SQLite file, which receives a judge
    task per sampled answer) is a temporary one: nothing lands in the project's var/.
    """
    db_url = f"{args.pg}/{args.db}"
    broker = args.broker_url or f"sqla+sqlite:///{var_dir}/celery-broker.sqlite3"
    env = dict(os.environ, DATABASE_URL=db_url, DEBUG="False",
               SECRET_KEY=secrets.token_urlsafe(50), ALLOWED_HOSTS="127.0.0.1,localhost",
               SECURE_SSL_REDIRECT="False",  # gunicorn on loopback speaks plain HTTP
               LOG_LEVEL="WARNING", DJANGO_SETTINGS_MODULE="treue_site.settings",
               TREUE_VAR_DIR=var_dir, CELERY_BROKER_URL=broker,
               # Counted as in production (one cache increment a request), never reached.
               TREUE_API_RATE_LIMIT="100000000")
    manage(env, "migrate", "--noinput")
    manage(env, "create_use_case", USE_CASE_SLUG, "--name", "Benchmark")
    out = manage(env, "create_service", SERVICE_NAME, "--use-case", USE_CASE_SLUG)
    key = out.strip().splitlines()[-1]
    with connect(db_url) as conn:
        row = conn.execute(
            "SELECT s.id, u.id, u.sample_rate FROM monitoring_service s, monitoring_usecase u"
            " WHERE s.name = %s AND u.slug = %s", (SERVICE_NAME, USE_CASE_SLUG)
        ).fetchone()
    if row is None:
        raise BenchError("the use case or the service was not created")
    return Setup(db_url, env, key, *row)


class Answers:
    """Generates the answers of each phase just before it runs (they take memory)."""

    def __init__(self, seed: int, flag_share: float) -> None:
        self.rng = Random(seed)
        self.corpus = Corpus(self.rng)
        self.flag_share = flag_share
        self.run_id = secrets.token_hex(3)  # external ids differ between runs with --keep

    def make(self, phase: str, n: int) -> list[dict[str, Any]]:
        t0 = time.monotonic()
        out = [make_answer(self.rng, self.corpus, f"{self.run_id}-{phase}-{i:06d}",
                           self.flag_share) for i in range(n)]
        if out:
            size = sum(len(encode(p)) for p in out[:100]) / min(n, 100) / 1024
            tokens = sum(len(p["logprobs"]["content"]) for p in out) / n
            print(f"{phase}: generated {n} answers in {time.monotonic() - t0:.1f} s "
                  f"({tokens:.0f} tokens, {size:.1f} KiB of JSON each)", flush=True)
        return out


def cpu_reference(rounds: int = 5) -> float:
    """Milliseconds of this process's CPU for a fixed piece of work, best of `rounds`.

    This machine's CPU speed drifts (shared hosts): the same code measured 60 % apart in CPU per
    answer within an hour. The figure, printed before and after the phases, tells runs on a fast
    moment from runs on a slow one. The work (JSON of a fixed 300-token logprobs object, a loop
    over its numbers) is the bench's own and uses no product code, so it compares across
    commits.
    """
    rng = Random(12345)
    doc = {"content": [
        {"token": f" w{i}", "logprob": -rng.random(), "bytes": [32, 119, 48 + i % 10],
         "top_logprobs": [{"token": "x", "logprob": -5.0, "bytes": [120]}]}
        for i in range(300)
    ]}
    text = json.dumps(doc)
    best = math.inf
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(20):
            items = json.loads(text)["content"]
            total = 0.0
            for item in items:
                total += math.exp(item["logprob"]) * len(item["token"])
            json.dumps(items)
        best = min(best, (time.process_time() - t0) * 1000)
    return best


def git_state() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, text=True,
                             capture_output=True, timeout=10, check=False).stdout.strip()
        return out or "unknown"
    return "unknown"


def run(args: argparse.Namespace) -> int:
    server: Server | None = None
    meter: CpuMeter | None = None
    created = False
    var_dir = tempfile.TemporaryDirectory(prefix="treue-bench-")
    try:
        t0 = time.monotonic()
        create_database(args.pg, args.db, args.replace)
        created = True
        setup = prepare_database(args, var_dir.name)
        meter = CpuMeter(setup.db_url)
        print(f"code {git_state()}; database {args.db} ready in {time.monotonic() - t0:.1f} s; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
              f"CPU reference {cpu_reference():.1f} ms (lower is a faster moment)", flush=True)
        answers = Answers(args.seed, args.flag_share)
        results: dict[str, PhaseResult] = {}
        expected: dict[str, list[str]] = {}

        if {"keyless", "single", "batch"} & set(args.phases):
            server = start_server(args, setup.env)
            meter.server_pid = server.proc.pid
            print(f"gunicorn: {args.workers} workers x {args.threads} threads "
                  f"({args.worker_class}) on {server.url}", flush=True)
            payloads = answers.make("warmup", args.warmup)
            warm = phase_single("warmup", payloads, server.url, setup.key, args.clients,
                                time.monotonic() + args.phase_timeout, meter)
            expected["warmup"] = [p["external_id"] for p in payloads]
            if warm.bad:
                print_phase(warm, "per request")
                raise BenchError(f"the warm-up failed; gunicorn log:\n{server.log_tail()}")

        for phase in args.phases:
            payloads = answers.make(phase, args.answers)
            deadline = time.monotonic() + args.phase_timeout
            if phase == "keyless":
                assert server is not None
                results[phase] = phase_single(phase, payloads, server.url, None, args.clients,
                                              deadline, meter)
                print_phase(results[phase], "per request")
            elif phase == "single":
                assert server is not None
                results[phase] = phase_single(phase, payloads, server.url, setup.key,
                                              args.clients, deadline, meter)
                expected[phase] = [p["external_id"] for p in payloads]
                print_phase(results[phase], "per request")
            elif phase == "batch":
                assert server is not None
                results[phase] = phase_batch(payloads, server.url, setup.key,
                                             args.batch_clients, args.batch_size, deadline,
                                             meter)
                expected[phase] = [p["external_id"] for p in payloads]
                print_phase(results[phase], "per batch")
            else:
                rows = direct_rows(payloads, setup)
                methods = (["copy", "executemany"] if args.direct_method == "both"
                           else [args.direct_method])
                for method in methods:
                    # (service, external_id) is unique: fresh external ids for each method.
                    name = f"direct {method}"
                    batch = [DirectRow(dict(r.answer, external_id=f"{r.answer['external_id']}"
                                                                  f"-{method}"), r.chunks)
                             for r in rows]
                    results[name] = phase_direct(name, setup, batch, args.batch_size, method,
                                                 meter)
                    expected[name] = [r.answer["external_id"] for r in batch]
                    print_phase(results[name], "per batch")
            del payloads
        if server is not None and (tail := server.log_tail(20 if any(
                r.bad for r in results.values()) else 5)):
            print(f"gunicorn log (last lines):\n{tail}")

        print(f"CPU reference {cpu_reference():.1f} ms after the phases", flush=True)
        met = summary(results, args.clients)
        problems = verify(setup.db_url, setup.service_id, expected)
        for problem in problems:
            print(f"  ! {problem}")
        if problems or any(r.bad for r in results.values()):
            return 1
        return 2 if args.strict and not met else 0
    finally:
        clean_up(server=server, meter=meter, created=created, keep=args.keep, pg=args.pg,
                 db=args.db, var_dir=var_dir)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with signals_handled(args.time_limit):
            return run(args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted; cleaned up", file=sys.stderr)
    except (TimeoutError, subprocess.TimeoutExpired) as e:
        print(f"error: {e}; cleaned up", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
