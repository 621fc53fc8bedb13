"""The demo judge: a local OpenAI-compatible endpoint whose verdicts are replayed human labels.

The demo (``scripts/demo.sh``) has no model to call, yet tier 2 should visibly work: answers
sampled at ingest get judge runs, a Celery worker scores them in the background, the pages show
claims and verdicts. This server stands in for the judge model. It speaks the OpenAI chat
completions protocol, so the worker calls it through the real ``openai`` client exactly as it
would call a real endpoint, and it answers both judge requests from the RAGTruth sample in
``demo/``:

- decomposition: the answer split into sentences (list markers, "Based on the given passages,"
  and pleasantries removed; "Unable to answer …" is an abstention, ``[]``);
- verification: the claim is found in the demo answers and judged by the human hallucination
  spans over it — most of it labelled: UNGEDECKT, some of it: TEILWEISE, none: GEDECKT.

No model is involved and nothing is random: the same request always gets the same reply. Text
that is not a demo answer (a real service's answer sent to the demo) still gets well-formed
replies — its sentences as claims, every verdict GEDECKT — so nothing breaks, but those
verdicts mean nothing, which is why the demo says everywhere that its judge replays labels.

It listens on loopback only. ``python -m monitoring.demo_judge --port 8790`` prints its URL.
It needs neither Django nor the database.
"""

import argparse
import json
import logging
import math
import re
import signal
import string
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from monitoring.demo import DEMO_JUDGE_MODEL, SAMPLE_FILE
from monitoring.domain import judge_prompt as prompts
from monitoring.domain.judge_parse import Label

logger = logging.getLogger("treue.demo_judge")

DEFAULT_PORT = 8790
NOTICE = (
    "Demo-Prüfer: Urteile sind wiedergegebene menschliche Labels (RAGTruth), kein Modell / "
    "demo judge: verdicts are replayed human labels (RAGTruth), not a model"
)

# RAGTruth's span types; all of them mark text the passages do not support.
HALLUCINATION_TYPES = frozenset({
    "Evident Baseless Info", "Subtle Baseless Info", "Evident Conflict", "Subtle Conflict",
})
# Share of a claim's letters and digits inside labelled spans from which it counts as made up
# as a whole ("most of the claim"); anything less but at least MIN_COVERED characters is
# partly supported. The floor keeps a span that ends a character into the next sentence (the
# annotators' boundaries are not exact) from marking that sentence; a short span that lies
# wholly inside the claim ("°F", "5") marks it all the same.
UNSUPPORTED_SHARE = 0.5
MIN_COVERED = 3

# RAGTruth's generators open most answers this way; it is framing, not a claim.
_FRAMING = re.compile(
    r"^(?:based on|according to|from) (?:the )?(?:given|provided|above)? ?"
    r"(?:passages?|information|context|sources?)(?: provided| given| above)?,\s*",
    re.IGNORECASE,
)
# Sentences that assert nothing about the world (rule 5 of the decomposition prompt).
_NO_CLAIM = re.compile(
    r"^(?:i hope (?:this|that) (?:helps|answers your question)|hope (?:this|that) helps"
    r"|ich hoffe,? (?:das|dies) hilft"
    r"|let me know\b.*|sure|certainly|great question|thank you|thanks)\W*\Z",
    re.IGNORECASE,
)
# Introductions that only announce what follows ("here are the steps:", "Passage 1:").
_INTRODUCES = re.compile(
    r"^(?:here(?: is|['’]s| are)|passage \d+\W*\Z)|\bfollow(?:ing)? these steps|\bthe following\b",
    re.IGNORECASE,
)
# "I don't know" answers: no claims at all, an abstention.
_ABSTAINS = re.compile(
    r"^(?:unable to answer|i (?:am unable|cannot|can ?not|can't) (?:to )?answer)\b",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}[.)]|[-*•–])\s+")
# A sentence ends at . ! or ? (and closing quotes or brackets) before whitespace and a capital
# or a digit (perhaps after an opening quote); `_sentences` checks the capital, umlauts included.
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*\s+(?=[\"'“„‘(\[]?(?P<next>\w))")
_ABBREVIATIONS = frozenset({
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "no", "approx", "u.s", "inc",
    "jr", "sr", "co", "ltd", "mt", "ft", "prof", "fig",
})
_WORD_BEFORE = re.compile(r"([\w.]+)$")


def split_claims(answer: str) -> list[tuple[int, int]]:
    """The claims of ``answer`` as (start, end) spans: its sentences, each an exact substring.

    Keeping claims verbatim is what lets verification find them again among the demo answers.
    Framing ("Based on the given passages,"), introductions ("here are the steps:"),
    pleasantries and list markers are left out; an answer that says it cannot answer has no
    claims.
    """
    if _ABSTAINS.match(answer.strip()):
        return []
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in answer.splitlines(keepends=True):
        start = offset
        offset += len(line)
        marker = _LIST_MARKER.match(line)
        if marker:
            start += marker.end()
        for s, e in _sentences(answer, start, offset):
            framing = _FRAMING.match(answer, s, e)
            if framing:
                s = framing.end()
            text = answer[s:e]
            if (
                _NO_CLAIM.match(text)
                or _ABSTAINS.match(text)
                or (text.endswith(":") and _INTRODUCES.search(text))
                or not any(c.isalnum() for c in text)
            ):
                continue
            spans.append((s, e))
    return spans


def _sentences(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    begin = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if not (match["next"].isupper() or match["next"].isdigit()):
            continue
        word = _WORD_BEFORE.search(text, begin, match.start())
        before = word.group(1).lower().rstrip(".") if word else ""
        if before in _ABBREVIATIONS or (len(before) == 1 and before.isalpha()):
            continue  # "e.g. Mars", "J. K. Rowling"
        yield from _trimmed(text, begin, match.end())
        begin = match.end()
    yield from _trimmed(text, begin, end)


def _trimmed(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        yield start, end


@dataclass(frozen=True)
class DemoAnswer:
    id: str
    response: str
    passages: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]  # labelled hallucinations in `response`


def load_answers(path: Path = SAMPLE_FILE) -> list[DemoAnswer]:
    answers = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            answers.append(DemoAnswer(
                id=str(row["id"]),
                response=row["response"],
                passages=tuple(p.strip() for p in row["passages"] if p.strip()),
                spans=tuple(
                    (label["start"], label["end"]) for label in row["labels"]
                    if label["label_type"] in HALLUCINATION_TYPES
                ),
            ))
    return answers


def label_for(answer: DemoAnswer, claim: str) -> Label:
    """The verdict the human labels give ``claim``, a substring of ``answer.response``."""
    best = Label.GEDECKT
    start = answer.response.find(claim)
    while start != -1:
        positions = [i for i in range(start, start + len(claim)) if answer.response[i].isalnum()]
        covered = sum(any(s <= i < e for s, e in answer.spans) for i in positions)
        if positions and covered / len(positions) > UNSUPPORTED_SHARE:
            return Label.UNGEDECKT
        inside = any(start <= s and e <= start + len(claim) for s, e in answer.spans)
        if covered >= MIN_COVERED or (covered and inside):
            best = Label.TEILWEISE
        start = answer.response.find(claim, start + 1)
    return best


def _pattern(template: str) -> re.Pattern[str]:
    """A regex that reads the placeholders back out of a prompt template."""
    names = {"kontext": "context", "aussage": "claim"}  # the article's German names
    parts = []
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<{names.get(field, field)}>.*)")
    return re.compile("".join(parts) + r"\Z", re.DOTALL)


_DECOMPOSE_SYSTEMS = {prompts.DECOMPOSE_SYSTEM_DE, prompts.DECOMPOSE_SYSTEM_EN}
_VERIFY_SYSTEMS = {prompts.VERIFY_SYSTEM_DE, prompts.VERIFY_SYSTEM_EN}
_DECOMPOSE_USER = [_pattern(prompts.DECOMPOSE_USER_DE), _pattern(prompts.DECOMPOSE_USER_EN)]
_VERIFY_USER = [_pattern(prompts.VERIFY_USER_DE), _pattern(prompts.VERIFY_USER_EN)]
# For wording this module does not know (a later prompt version): the last labelled field.
_LOOSE_ANSWER = re.compile(r"(?:Antwort|Answer):\s*\n(?P<answer>.*?)(?:\n\n[^\n]*:\s*)?\Z",
                           re.DOTALL)
_LOOSE_CLAIM = re.compile(r"^(?:Aussage|Claim):[ \t]*(?P<claim>.+)$", re.MULTILINE)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(
            part.get("text", "") for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _match(patterns: Sequence[re.Pattern[str]], text: str) -> re.Match[str] | None:
    return next((m for p in patterns if (m := p.match(text))), None)


class DemoJudge:
    """Answers judge requests (lists of chat messages) from the demo answers' human labels."""

    def __init__(self, answers: Sequence[DemoAnswer]) -> None:
        self.answers = list(answers)
        self._by_text = {a.response.strip(): a for a in self.answers}

    def reply(self, messages: Sequence[Any]) -> tuple[str, str]:
        """The reply text and a short note for the log ("decompose 12794: 7 claims")."""
        system = next((_text(m.get("content")) for m in messages
                       if isinstance(m, dict) and m.get("role") == "system"), "")
        # The first user turn holds the task; a retry adds the previous reply and a reminder.
        user = next((_text(m.get("content")) for m in messages
                     if isinstance(m, dict) and m.get("role") == "user"), "")
        if system in _VERIFY_SYSTEMS:
            return self._verify(user)
        if system in _DECOMPOSE_SYSTEMS:
            return self._decompose(user)
        if _match(_VERIFY_USER, user) or "UNGEDECKT" in user:
            return self._verify(user)
        return self._decompose(user)

    def _decompose(self, user: str) -> tuple[str, str]:
        match = _match(_DECOMPOSE_USER, user) or _LOOSE_ANSWER.search(user)
        text = (match.group("answer") if match else user).strip()
        known = self._by_text.get(text) or self._contained_in(user)
        if known is not None:
            text = known.response
        claims = list(dict.fromkeys(text[s:e] for s, e in split_claims(text)))
        note = f"decompose {known.id if known else 'unknown answer'}: {len(claims)} claims"
        return json.dumps(claims, ensure_ascii=False), note

    def _contained_in(self, user: str) -> DemoAnswer | None:
        found = [a for a in self.answers if a.response.strip() and a.response.strip() in user]
        return max(found, key=lambda a: len(a.response), default=None)

    def _verify(self, user: str) -> tuple[str, str]:
        match = _match(_VERIFY_USER, user)
        if match:
            claim, context = match.group("claim").strip(), match.group("context")
        else:
            loose = _LOOSE_CLAIM.search(user)
            claim, context = (loose.group("claim").strip() if loose else ""), user
        candidates = [a for a in self.answers if claim and claim in a.response]
        if not candidates:
            return Label.GEDECKT.value, "verify unknown claim: GEDECKT (fallback)"
        # The same sentence can occur in several answers; their passages tell them apart.
        in_context = [a for a in candidates if all(p in context for p in a.passages)]
        answer = (in_context or candidates)[0]
        label = label_for(answer, claim)
        return label.value, f"verify {answer.id}: {label.value}"


def _tokens(text: str) -> int:
    """About four characters a token, as OpenAI's tokenisers average on English text."""
    return max(1, math.ceil(len(text) / 4))


def _error(status: int, message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class DemoJudgeServer:
    """The demo judge behind an OpenAI-compatible HTTP API on 127.0.0.1."""

    def __init__(
        self, port: int = DEFAULT_PORT, judge: DemoJudge | None = None, any_port: bool = False
    ) -> None:
        self.judge = judge or DemoJudge(load_answers())
        self._counter = 0
        self._lock = threading.Lock()
        try:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))
        except OSError:
            if not any_port:
                raise
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "DemoJudgeServer":
        """Serve in a background thread (tests); `serve_forever` serves in this one."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self._model()]}

    def _model(self) -> dict[str, Any]:
        return {"id": DEMO_JUDGE_MODEL, "object": "model", "created": 0, "owned_by": "treue-demo"}

    def completion(self, request: Any) -> tuple[int, dict[str, Any]]:
        """Status and body for a chat completions request."""
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return 400, _error(400, "'messages' must be a list", "invalid_request_error")
        model = request.get("model")
        if model != DEMO_JUDGE_MODEL:
            # Answering as another model would put that model's name on replayed labels.
            return 404, _error(
                404,
                f"The model {model!r} does not exist here: this demo judge serves only "
                f"{DEMO_JUDGE_MODEL!r} (replayed human labels, not a model).",
                "invalid_request_error",
                "model_not_found",
            )
        if request.get("stream"):
            return 400, _error(400, "the demo judge does not stream", "invalid_request_error")
        # temperature is irrelevant: the replies are deterministic anyway.
        content, note = self.judge.reply(request["messages"])
        finish = "stop"
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(limit, int) and limit > 0 and _tokens(content) > limit:
            content, finish = content[: limit * 4], "length"
        prompt_tokens = sum(
            _tokens(_text(m.get("content"))) + 4  # OpenAI counts a few tokens of framing
            for m in request["messages"] if isinstance(m, dict)
        )
        completion_tokens = _tokens(content)
        with self._lock:
            self._counter += 1
            number = self._counter
        logger.info("%s", note)
        return 200, {
            "id": f"chatcmpl-demo-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": DEMO_JUDGE_MODEL,
            "system_fingerprint": None,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish,
                "logprobs": None,
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _make_handler(server: DemoJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds
        # ~40 ms to every reply on a kept-alive connection.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per completion comes from DemoJudgeServer.completion

        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/v1/models":
                self._send(200, server.models())
            elif path == f"/v1/models/{DEMO_JUDGE_MODEL}":
                self._send(200, server._model())
            else:
                self._send(404, _error(404, "Not found", "invalid_request_error"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                self._send(404, _error(404, "Not found", "invalid_request_error"))
                return
            try:
                request = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, _error(400, "Invalid JSON body", "invalid_request_error"))
                return
            try:
                self._send(*server.completion(request))
            except Exception as e:  # a bug here must show as the 500 a real server sends
                logger.exception("demo judge failed")
                self._send(500, _error(500, f"demo judge error: {e!r}", "server_error"))

        def _send(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m monitoring.demo_judge",
        description="The demo's judge: an OpenAI-compatible endpoint on 127.0.0.1 that replays "
        "RAGTruth's human labels.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--any-port", action="store_true",
                        help="take any free port if --port is busy")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        server = DemoJudgeServer(port=args.port, any_port=args.any_port)
    except OSError as e:
        print(f"demo judge: cannot listen on 127.0.0.1:{args.port}: {e}", file=sys.stderr)
        return 1
    # demo.sh stops it with SIGTERM; leave through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(NOTICE, flush=True)
    print(f"URL: {server.base_url}  model: {DEMO_JUDGE_MODEL}  "
          f"({len(server.judge.answers)} demo answers)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
