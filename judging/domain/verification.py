"""Judging one answer (tier 2): decompose it into claims, verify each claim, score. The types it
works with (a call's result, a verdict, a judgement) are in `judgement.py`.

Independent of any client library: the caller passes ``call``, a function that sends chat
messages to the judge model (at temperature 0) and returns a ``CallResult``. Transport errors
are the caller's business: whatever ``call`` raises leaves ``judge_answer`` unchanged, and no
partial judgement is returned, so the caller can retry the whole answer.

Costs and latency: one decomposition call, then one call per claim, run concurrently (bounded),
so an answer with 8 claims takes about two calls' latency, not nine. A reply that cannot be read
is retried once with a reminder of the format; identical (claim, context) pairs reuse the
verdict without a call.

Batched mode (``mode=BATCHED``): the claims go to the judge in calls of at most ``batch_size``
(`batched.verify_batch_messages`), each under an id, with the judge's evidence per claim (chunk
ranks and a reason) unless ``evidence`` is off. A verdict counts only under its claim's id. What
the reply leaves open is asked once more in the same conversation (`batched.correction_messages`),
and only what is still open goes one by one to the per-claim prompt. An answer of 5 claims then
costs 2 calls instead of 6. Where the endpoint takes a JSON schema the batch call sends one
(``structured``; None: not yet known, tried and reported through ``on_structured``).

One-call mode (``mode=SINGLE``, `single`): claims and verdicts in one call; claims without a
readable verdict are verified as in batched mode, and a reply without a readable claim list
falls back to the decomposition.

Each judgement says the path its verdicts took (``PATHS``), so that a judge model that cannot
follow the format is seen and priced.
"""

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Any

from judging.domain import batched, single
from judging.domain.batch_reading import json_value, read_batch
from judging.domain.judge_parse import Label, parse_claims, parse_verdict
from judging.domain.judge_prompt import (
    decompose_messages,
    decompose_retry_messages,
    format_context,
    verify_messages,
    verify_retry_messages,
)
from judging.domain.judgement import (
    BATCHED,
    DECOMPOSITION_UNPARSEABLE,
    MODES,
    PATH_BATCHED,
    PATH_CORRECTED,
    PATH_FALLBACK,
    PATH_PER_CLAIM,
    PATH_SINGLE,
    PER_CLAIM,
    SINGLE,
    BatchCall,
    Batching,
    CachedVerdict,
    CacheKey,
    CallRecord,
    CallResult,
    ClaimVerdict,
    JudgeCall,
    Judgement,
    Structured,
    VerdictCache,
)
from judging.domain.scoring import ScoreResult, score_labels


def judge_answer(
    *,
    question: str,
    answer: str,
    chunks: Sequence[str],
    language: str,
    call: JudgeCall,
    concurrency: int,
    cache: VerdictCache | None = None,
    verify_call: JudgeCall | None = None,
    mode: str = PER_CLAIM,
    batch_size: int = batched.DEFAULT_BATCH_SIZE,
    batch_call: BatchCall | None = None,
    decomposition: str | None = None,
    on_decomposed: Callable[[str], None] | None = None,
    evidence: bool = True,
    structured: bool | None = False,
    on_structured: Callable[[bool, str], None] | None = None,
) -> Judgement:
    """Judge one answer against its retrieved chunks (in rank order).

    ``verify_call`` (default ``call``) lets the caller give verifications a smaller output-token
    cap than the decomposition, ``batch_call`` (default: ``verify_call`` without a schema)
    batched and one-call requests one that fits a line per claim. ``cache`` may be shared by the
    answers of one run; only readable verdicts are cached, each as soon as it arrives.

    ``evidence``: batched and one-call verdicts come with chunk ranks and a reason.
    ``structured``: send a JSON schema with batched and one-call requests (True), not (False),
    or try it and report what the endpoint did to ``on_structured(supported, detail)`` (None).

    Resuming: ``decomposition`` is a decomposition reply an earlier attempt received (used if
    it reads as claims, instead of a call), ``on_decomposed`` receives a readable one as soon as
    it arrives, and ``cache`` holds the verdicts received before: so a caller that stores both
    asks, on a retry, only for what is still missing. Raises ValueError for an unknown language
    or mode, or concurrency < 1, and re-raises the first exception of any call, after the calls
    already in flight have returned (their verdicts go to ``cache``).
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    log: list[CallRecord] = []
    verifier = verify_call or call
    batching = None if mode == PER_CLAIM else Batching(
        chunks, batch_size, batch_call or _schemaless(verifier), evidence,
        Structured(structured, on_structured),
    )
    given: dict[int, ClaimVerdict] = {}

    claims = None if decomposition is None else parse_claims(decomposition)
    raw = decomposition or ""
    corrected = False
    if claims is None and batching is not None and mode == SINGLE:
        raw, claims, given, corrected = _single(question, answer, language, batching, log)
        if claims is not None and on_decomposed is not None:
            # Stored as the claim list, so a resumed run reads it as a decomposition.
            on_decomposed(json.dumps(claims, ensure_ascii=False))
    decomposed = claims is None
    if claims is None:
        raw, claims = _decompose(question, answer, language, call, log)
        if claims is None:
            result = ScoreResult(None, False, True, DECOMPOSITION_UNPARSEABLE, 0, 0)
            return _judgement((), raw, result, log)
        if on_decomposed is not None:
            on_decomposed(raw)

    verdicts, verify_log, asked = _verify_all(
        claims,
        context=format_context(chunks),
        language=language,
        call=verifier,
        concurrency=concurrency,
        cache={} if cache is None else cache,
        batching=batching,
        given=given,
    )
    if mode == PER_CLAIM:
        path = PATH_PER_CLAIM
    elif mode == BATCHED:
        path = asked or PATH_BATCHED
    elif decomposed or asked:
        path = PATH_FALLBACK  # the one call gave no claims, or left verdicts to ask again
    else:
        path = PATH_CORRECTED if corrected else PATH_SINGLE
    result = score_labels([v.label for v in verdicts])
    return _judgement(tuple(verdicts), raw, result, log + verify_log, path if claims else "")


def _schemaless(call: JudgeCall) -> BatchCall:
    def batch(
        messages: list[dict[str, str]], response_format: dict[str, Any] | None = None
    ) -> CallResult:
        if response_format is not None:
            raise batched.StructuredOutputRefused("this call takes no schema")
        return call(messages)

    return batch


def _structured_call(
    batching: Batching, build: Callable[[bool], list[dict[str, str]]],
    schema: Callable[[], dict[str, Any]],
) -> tuple[list[dict[str, str]], CallResult, bool]:
    """One batch or one-call request, with the schema where the endpoint takes one (or may):
    the messages sent, the reply, and whether the schema went with it. A refused schema is
    learned and the request made again without it."""
    if batching.structured.supported is not False:
        messages = build(True)
        try:
            return messages, batching.call(messages, schema()), True
        except batched.StructuredOutputRefused as e:
            batching.structured.learned(False, str(e)[:500])
    messages = build(False)
    return messages, batching.call(messages, None), False


def _kept_to_schema(batching: Batching, sent: bool, reply: CallResult) -> bool:
    """After a request with a schema: learn whether the endpoint kept to it (the reply is one
    JSON value; a reply cut off says nothing), and whether the correction sends it again."""
    if sent and not reply.truncated and reply.text.strip():
        # An empty reply (a refusal, a content filter) says nothing about the schema.
        kept = json_value(reply.text) is not None
        batching.structured.learned(kept, "" if kept else "reply not in the schema")
    return sent and batching.structured.supported is not False


def _single(
    question: str, answer: str, language: str, batching: Batching, log: list[CallRecord]
) -> tuple[str, list[str] | None, dict[int, ClaimVerdict], bool]:
    """The one-call request (and its correction): the reply, its claims (None if unreadable),
    the verdicts it gave, by position, and whether it took a correction. Its tokens are shared
    out over those verdicts."""
    def build(_structured: bool) -> list[dict[str, str]]:
        return single.single_messages(question=question, answer=answer, chunks=batching.chunks,
                                      language=language, evidence=batching.evidence)

    messages, reply, sent = _structured_call(
        batching, build, lambda: single.single_schema(evidence=batching.evidence))
    log.append(_record("single", None, 1, reply))
    reading = single.read_single(reply.text, chunk_count=len(batching.chunks))
    sent = _kept_to_schema(batching, sent, reply)
    corrected = reading.claims is None
    if corrected:
        reply = batching.call(single.correction_messages(messages, reply.text, language=language),
                              single.single_schema(evidence=batching.evidence) if sent else None)
        log.append(_record("correct_single", None, 2, reply))
        reading = single.read_single(reply.text, chunk_count=len(batching.chunks))
    if reading.claims is None:
        return reply.text, None, {}, corrected
    decided = sorted(reading.verdicts.items())
    found = {
        position: _shared_verdict(position, reading.claims[position], evidence, reply, i,
                                  len(decided))
        for i, (position, evidence) in enumerate(decided)
    }
    return reply.text, reading.claims, found, corrected


def _shared_verdict(
    position: int, claim: str, evidence: batched.Evidence, reply: CallResult, index: int,
    share: int,
) -> "ClaimVerdict":
    """A verdict read from a reply that decided ``share`` claims: the reply's tokens and
    latency shared out (the first takes the remainder)."""
    share = max(1, share)

    def part(total: int) -> int:
        return total // share + (total % share if index == 0 else 0)

    return ClaimVerdict(
        position=position, claim=claim, label=evidence.label, raw=reply.text, attempts=1,
        prompt_tokens=part(reply.prompt_tokens), completion_tokens=part(reply.completion_tokens),
        latency_ms=part(reply.latency_ms), cached=False, model=reply.model,
        chunks=evidence.chunks, reason=evidence.reason,
    )


def _decompose(
    question: str, answer: str, language: str, call: JudgeCall, log: list[CallRecord]
) -> tuple[str, list[str] | None]:
    """The decomposition reply and its claims (None if unreadable after one reminder)."""
    reply = call(decompose_messages(question=question, answer=answer, language=language))
    log.append(_record("decompose", None, 1, reply))
    claims = parse_claims(reply.text)
    if claims is None:
        reply = call(
            decompose_retry_messages(
                question=question, answer=answer, language=language, previous_reply=reply.text
            )
        )
        log.append(_record("decompose", None, 2, reply))
        claims = parse_claims(reply.text)
    return reply.text, claims


def _judgement(
    claims: tuple[ClaimVerdict, ...], raw: str, result: ScoreResult, log: list[CallRecord],
    path: str = "",
) -> Judgement:
    return Judgement(
        claims=claims,
        decomposition_raw=raw,
        result=result,
        calls=len(log),
        prompt_tokens=sum(r.prompt_tokens for r in log),
        completion_tokens=sum(r.completion_tokens for r in log),
        failed_reason=result.reason if result.failed else None,
        call_log=tuple(log),
        cached_tokens=sum(r.cached_tokens for r in log),
        usage_unknown_calls=sum(not r.usage_known for r in log),
        path=path,
    )


def _record(purpose: str, position: int | None, attempt: int, reply: CallResult) -> CallRecord:
    return CallRecord(
        purpose,
        position,
        attempt,
        reply.text,
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.latency_ms,
        reply.model,
        reply.cached_tokens,
        reply.usage_known,
    )


def _verify_all(
    claims: list[str],
    *,
    context: str,
    language: str,
    call: JudgeCall,
    concurrency: int,
    cache: VerdictCache,
    batching: Batching | None = None,
    given: dict[int, ClaimVerdict] | None = None,
) -> tuple[list[ClaimVerdict], list[CallRecord], str]:
    """The claims' verdicts, the calls made for them, and the path they took ("" when nothing
    was asked: every verdict ``given`` or cached)."""
    digest = hashlib.sha256(context.encode("utf-8", "surrogatepass")).hexdigest()
    verdicts: list[ClaimVerdict | None] = [None] * len(claims)
    pending: list[int] = []
    new: dict[CacheKey, CachedVerdict] = {}
    # Claims from parse_claims are unique, so within one answer a hit can only come from an
    # earlier answer of the same run.
    for position, claim in enumerate(claims):
        hit = cache.get((language, claim, digest))
        if given and position in given:
            verdicts[position] = given[position]
        elif hit is None:
            pending.append(position)
        else:
            verdicts[position] = ClaimVerdict(
                position, claim, hit.label, hit.raw, 0, 0, 0, 0, True, hit.model,
                hit.chunks, hit.reason,
            )

    def cached(verdict: ClaimVerdict) -> dict[CacheKey, CachedVerdict]:
        if verdict.label is Label.UNPARSEABLE:
            return {}
        return {(language, verdict.claim, digest): CachedVerdict(
            verdict.label, verdict.raw, verdict.model, verdict.chunks, verdict.reason
        )}

    for verdict in (given or {}).values():
        new.update(cached(verdict))
    if new:
        cache.update(new)  # the one-call reply's verdicts, stored together

    def verify(position: int) -> tuple[ClaimVerdict, list[CallRecord]]:
        claim = claims[position]
        first = call(verify_messages(context=context, claim=claim, language=language))
        replies = [first]
        label = parse_verdict(first.text)
        if label is Label.UNPARSEABLE:
            replies.append(
                call(
                    verify_retry_messages(
                        context=context, claim=claim, language=language, previous_reply=first.text
                    )
                )
            )
            label = parse_verdict(replies[-1].text)
        verdict = ClaimVerdict(
            position=position,
            claim=claim,
            label=label,
            raw=replies[-1].text,
            attempts=len(replies),
            prompt_tokens=sum(r.prompt_tokens for r in replies),
            completion_tokens=sum(r.completion_tokens for r in replies),
            latency_ms=sum(r.latency_ms for r in replies),
            cached=False,
            model=replies[-1].model,
        )
        return verdict, [_record("verify", position, n, r) for n, r in enumerate(replies, 1)]

    def settle(verdict: ClaimVerdict, records: list[CallRecord]) -> None:
        verdicts[verdict.position] = verdict
        log.extend(records)
        cache.update(cached(verdict))

    log: list[CallRecord] = []
    path = ""
    if batching is not None and pending:
        # One call per batch of pending claims (and one correction); what is still open is
        # asked one by one.
        path = PATH_BATCHED
        open_ = []
        for group in batched.batches(pending, batching.size):
            found, left, records, corrected = _verify_batch(
                group, claims, batching=batching, language=language
            )
            # A batch's verdicts go to the cache in one update (a caller that stores them
            # stores them together).
            new = {}
            for verdict in found:
                verdicts[verdict.position] = verdict
                new.update(cached(verdict))
            cache.update(new)
            log.extend(records)
            open_ += left
            if corrected and path == PATH_BATCHED:
                path = PATH_CORRECTED
        pending = open_
        if pending:
            path = PATH_FALLBACK
    elif pending:
        path = PATH_PER_CLAIM
    if len(pending) == 1 or (pending and concurrency <= 1):
        # Nothing to run side by side: no threads started (a few ms each, per answer).
        for position in pending:
            settle(*verify(position))
    elif pending:
        executor = ThreadPoolExecutor(
            max_workers=min(concurrency, len(pending)), thread_name_prefix="treue-judge"
        )
        futures: list[Future[tuple[ClaimVerdict, list[CallRecord]]]] = [
            executor.submit(verify, position) for position in pending
        ]
        settled: set[Future[tuple[ClaimVerdict, list[CallRecord]]]] = set()
        try:
            for future in as_completed(futures):
                settle(*future.result())
                settled.add(future)
        except BaseException:
            # The first failure propagates as raised, once the calls already in flight have
            # returned: their verdicts were paid for, and in the cache a retry need not ask
            # for them again (a call waits at most its timeout). The queued rest is dropped.
            for future in futures:
                future.cancel()
            for future in futures:
                if future in settled or future.cancelled():
                    continue
                try:
                    settle(*future.result())
                except Exception:  # the first failure is what is raised
                    continue
            raise
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
    log.sort(key=lambda r: (r.position if r.position is not None else -1, r.attempt))
    return [v for v in verdicts if v is not None], log, path


def _verify_batch(
    group: list[int], claims: list[str], *, batching: Batching, language: str
) -> tuple[list[ClaimVerdict], list[int], list[CallRecord], bool]:
    """One batched call for the claims at positions ``group``, and one correction in the same
    conversation for what it leaves open: the verdicts, the positions still open, the records,
    and whether a correction was asked. A reply's tokens and latency are shared out over the
    claims it decided."""
    texts = [claims[p] for p in group]
    ids = batched.claim_ids(texts)
    chunk_count = len(batching.chunks)

    def build(structured: bool) -> list[dict[str, str]]:
        return batched.verify_batch_messages(
            chunks=batching.chunks, claims=texts, language=language,
            evidence=batching.evidence, structured=structured,
        )

    messages, reply, sent = _structured_call(
        batching, build, lambda: batched.batch_schema(evidence=batching.evidence))
    reading = read_batch(
        reply.text, texts, ids=ids, cut=reply.truncated, chunk_count=chunk_count)
    sent = _kept_to_schema(batching, sent, reply)
    records = [_record("verify_batch", group[0], 1, reply)]
    found = _decided(group, texts, reading, reply)
    open_numbers = reading.missing
    corrected = bool(open_numbers)
    if corrected:
        missing_ids = [ids[n - 1] for n in open_numbers]
        again = batching.call(
            batched.correction_messages(messages, reply.text, missing_ids, language=language,
                                        structured=sent),
            batched.batch_schema(evidence=batching.evidence) if sent else None,
        )
        records.append(_record("correct_batch", group[0], 2, again))
        second = read_batch(
            again.text, texts, ids=ids, cut=again.truncated, chunk_count=chunk_count)
        # A correction that answers a claim decided before with another verdict leaves it in
        # doubt: asked again on its own, as what the correction did not settle.
        doubted = {n for n, e in second.verdicts.items()
                   if n in reading.verdicts and e.label is not reading.verdicts[n].label}
        found = [v for v in found if group.index(v.position) + 1 not in doubted]
        settled = {n: e for n, e in second.verdicts.items() if n in open_numbers}
        found += _decided(group, texts, batched.BatchReading(settled, ()), again)
        open_numbers = tuple(sorted(
            {n for n in open_numbers if n not in settled} | doubted))
    return found, [group[n - 1] for n in open_numbers], records, corrected


def _decided(
    group: list[int], texts: list[str], reading: batched.BatchReading, reply: CallResult
) -> list[ClaimVerdict]:
    decided = list(reading.verdicts.items())
    return [
        _shared_verdict(group[n - 1], texts[n - 1], evidence, reply, i, len(decided))
        for i, (n, evidence) in enumerate(decided)
    ]
