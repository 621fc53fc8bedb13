"""The demo judge: a local OpenAI-compatible endpoint whose verdicts are replayed human labels.

The demo (``scripts/demo.sh``) has no model to call, yet tier 2 should visibly work: answers
sampled at ingest get judge runs, a Celery worker scores them in the background, the pages show
claims and verdicts. This server stands in for the judge model. It speaks the OpenAI chat
completions protocol, so the worker calls it through the real ``openai`` client exactly as it
would call a real endpoint, and it answers both judge requests from RAGTruth's QA answers in
``demo/``:

- decomposition: the answer split into sentences (list markers, "Based on the given passages,"
  and pleasantries removed; "Unable to answer …" is an abstention, ``[]``);
- verification: the claim is found in the demo answers and judged by the human hallucination
  spans over it — most of it labelled: UNGEDECKT, some of it: TEILWEISE, none: GEDECKT;
- batched verification (system message starting with ``VERIFY_BATCH_SYSTEM_DE/EN``): the
  claims listed under their ids ("Aussagen (3):" / "Claims (3):", then "K7: claim"), each
  verdict as above under its id, a line each (``K7: GEDECKT [2] reason``, the chunk sharing
  most of the claim's words and where the verdict came from; ``K7: GEDECKT`` where the format
  asks for the word alone); a correction turn (the judge's reply and a user message naming
  the ids still open) is answered for those ids only;
- one-call judging (system message starting with ``SINGLE_SYSTEM_DE/EN``): the answer split as
  for the decomposition, each claim with its verdict, as ``{"claims": [{"claim", "verdict",
  "chunks", "reason"}]}``.

It supports structured output: a request with a ``response_format`` (a JSON schema) gets JSON
in that schema — for a batched request ``{"verdicts": [{"id", "verdict", "chunks",
"reason"}]}`` with the schema's fields — and its schema counted as prompt tokens, as OpenAI
bills it. A response_format of an unknown type is refused with a 400, as OpenAI refuses it.

The demo judge is deliberately a little lenient: it passes over the spans the annotators called
"Subtle Baseless Info" (plausible details the passages do not state), which the experts of the
demo count (``expert_labels``: all spans); and a sentence that two models said to the same
question, labelled in one answer and not in the other, gets the kinder verdict. So the judge
scores about 0.025 above the experts, never below them, as a real judge model is off by a few
hundredths, and the expert-scale estimate — the judge's figure corrected by the reviewed
answers — has something to correct.

No model is involved and nothing is random: the same request always gets the same reply. Text
that is not a demo answer (a real service's answer sent to the demo) gets its sentences as
claims and a word check (``word_check``): a number or a negation the passages do not have is
UNGEDECKT, otherwise the share of the claim's words found in the passages decides. That is no
model either (a paraphrase is missed), and the demo says so wherever its verdicts are shown.

The same server plays the demo's generator for self-consistency investigations: a request for
a demo answer's own model (``llama-2-70b-chat``, ...) with that answer's messages (see
``treue_demo.data.demo_messages``) gets that answer back, with its synthetic log-probabilities
when asked. It is not a model either: it replays the stored answer, and for answers with human
hallucination labels it varies the labelled spans on a script (numbers shifted, other spans left
out or replaced by a hedge), so that an investigation finds inconsistency where humans found
invented content. The n-th identical request (same model, messages and temperature) gets the
(n mod 3)-th version — the answer itself, then two variations — so the same investigation run
twice gets the same three samples. At temperature 0 the answer is always replayed unchanged.
For the investigation's contradiction check, the judge compares the samples' texts: identical
is KONSISTENT; samples of a demo answer that differ inside its labelled spans are WIDERSPRUCH;
anything else is KONSISTENT (a fallback).

It listens on loopback only. ``python -m treue_demo.server --port 8790`` prints its URL.
It needs neither Django nor the database.
"""

import argparse
import json
import logging
import math
import signal
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from treue_demo.answers import (
    load_answers,
    message_text,
)
from treue_demo.data import (
    DEMO_JUDGE_MODEL,
)
from treue_demo.generator import DEMO_RAG_MODEL, DemoGenerator, rag_reply
from treue_demo.judge import JUDGE_VARIANTS, VERDICT_FIELD, VERDICT_WORD, DemoJudge

logger = logging.getLogger("treue.demo_judge")

DEFAULT_PORT = 8790
NOTICE = (
    "Demo-Prüfer: Urteile sind wiedergegebene menschliche Labels (RAGTruth), für andere "
    "Antworten ein Wortvergleich, kein Modell; "
    "Demo-Generator: gibt die Demo-Antworten wieder, mit geskripteter Variation der gelabelten "
    "Stellen, kein Modell / "
    "demo judge: verdicts are replayed human labels (RAGTruth), for other answers a word "
    "check, not a model; demo generator: "
    "replays the demo answers with scripted variation of the labelled spans, not a model"
)


def _tokens(text: str) -> int:
    """About four characters a token, as OpenAI's tokenisers average on English text."""
    return max(1, math.ceil(len(text) / 4))


def _within(tokens: list[dict[str, Any]], length: int) -> list[dict[str, Any]]:
    """The tokens that spell the first ``length`` characters (a reply cut at max_tokens)."""
    kept, used = [], 0
    for token in tokens:
        used += len(token["token"])
        if used > length:
            break
        kept.append(token)
    return kept


def _refused_format(response_format: Any) -> str | None:
    """Why a request's response_format is refused (as OpenAI words it), None if it is taken:
    none, text, json_object, or a json_schema with its schema. The demo judge supports
    structured output: batched and one-call replies keep to the schema."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind not in ("text", "json_object", "json_schema"):
        return ("Invalid value for 'response_format.type': expected one of 'text', "
                "'json_object' or 'json_schema'.")
    spec = response_format.get("json_schema")
    if kind == "json_schema" and not (isinstance(spec, dict) and isinstance(spec.get("name"), str)
                                      and isinstance(spec.get("schema"), dict)):
        return "Missing required parameter: 'response_format.json_schema' (a name and a schema)."
    return None


def _error(status: int, message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class DemoJudgeServer:
    """The demo judge behind an OpenAI-compatible HTTP API on 127.0.0.1."""

    def __init__(
        self, port: int = DEFAULT_PORT, judge: DemoJudge | None = None, any_port: bool = False
    ) -> None:
        self.judge = judge or DemoJudge(load_answers())
        self.generator = DemoGenerator(self.judge.answers)
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
        names = [DEMO_JUDGE_MODEL, *JUDGE_VARIANTS, DEMO_RAG_MODEL, *self.generator.models]
        return {"object": "list", "data": [self._model(name) for name in names]}

    def _model(self, name: str = DEMO_JUDGE_MODEL) -> dict[str, Any] | None:
        if name == DEMO_JUDGE_MODEL or name in JUDGE_VARIANTS or name == DEMO_RAG_MODEL:
            return {"id": name, "object": "model", "created": 0, "owned_by": "treue-demo"}
        if name in self.generator.models:  # replayed answers, not that model
            return {"id": name, "object": "model", "created": 0,
                    "owned_by": "treue-demo-replay"}
        return None

    def completion(self, request: Any) -> tuple[int, dict[str, Any]]:
        """Status and body for a chat completions request."""
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return 400, _error(400, "'messages' must be a list", "invalid_request_error")
        model = request.get("model")
        judges = (DEMO_JUDGE_MODEL, *JUDGE_VARIANTS)
        if model not in (*judges, DEMO_RAG_MODEL) and model not in self.generator.models:
            # Answering as another model would put that model's name on replayed labels.
            return 404, _error(
                404,
                f"The model {model!r} does not exist here: this demo judge serves only "
                f"{DEMO_JUDGE_MODEL!r} (replayed human labels, not a model) and its variants "
                f"{', '.join(JUDGE_VARIANTS)}, answers RAG prompts from their sources as "
                f"{DEMO_RAG_MODEL!r}, and replays the "
                f"demo answers of {', '.join(self.generator.models)}.",
                "invalid_request_error",
                "model_not_found",
            )
        if request.get("stream"):
            return 400, _error(400, "the demo judge does not stream", "invalid_request_error")
        response_format = request.get("response_format")
        refused = _refused_format(response_format)
        if refused is not None:
            return 400, _error(400, refused, "invalid_request_error")
        logprobs = None
        if model == DEMO_RAG_MODEL:
            content, logprobs, note = rag_reply(request["messages"])
        elif model in judges:
            # temperature is irrelevant: the replies are deterministic anyway.
            content, note = self.judge.reply(request["messages"], response_format)
            if model in JUDGE_VARIANTS and not note.startswith("decompose"):
                # A one-call reply holds the claims' own text: only its verdicts are changed.
                words = VERDICT_FIELD if note.startswith("single") else VERDICT_WORD
                content = words.sub(
                    lambda m: JUDGE_VARIANTS[model].get(m.group(0), m.group(0)), content
                )
        else:
            answer = self.generator.find(model, request["messages"])
            if answer is None:
                return 400, _error(
                    400,
                    f"The demo generator replays only the demo answers: these messages are not "
                    f"those of a demo answer by {model!r} (it is not a model).",
                    "invalid_request_error",
                )
            temperature = request.get("temperature")
            temperature = 1.0 if not isinstance(temperature, int | float) else temperature
            content, logprobs, note = self.generator.reply(
                answer, request["messages"], float(temperature)
            )
        finish = "stop"
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(limit, int) and limit > 0 and _tokens(content) > limit:
            content, finish = content[: limit * 4], "length"
        if logprobs is not None and request.get("logprobs"):
            logprobs = {"content": _within(logprobs["content"], len(content)), "refusal": None}
        else:
            logprobs = None
        prompt_tokens = sum(
            _tokens(message_text(m.get("content"))) + 4  # OpenAI counts a few tokens of framing
            for m in request["messages"] if isinstance(m, dict)
        )
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            # OpenAI bills a JSON schema as prompt tokens.
            prompt_tokens += _tokens(json.dumps(response_format, ensure_ascii=False,
                                                separators=(",", ":")))
        completion_tokens = _tokens(content)
        with self._lock:
            self._counter += 1
            number = self._counter
        logger.info("%s", note)
        return 200, {
            "id": f"chatcmpl-demo-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish,
                "logprobs": logprobs,
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
            elif path.startswith("/v1/models/") and (
                model := server._model(path.removeprefix("/v1/models/"))
            ):
                self._send(200, model)
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
        prog="python -m treue_demo.server",
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
          f"({len(server.judge.answers)} demo answers; replayed as "
          f"{', '.join(server.generator.models)})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
