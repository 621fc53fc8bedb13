"""Judging one answer (tier 2): decompose it into claims, verify each claim, score.

Independent of any client library: the caller passes ``call``, a function that sends chat
messages to the judge model (at temperature 0) and returns a ``CallResult``. Transport errors
are the caller's business: whatever ``call`` raises leaves ``judge_answer`` unchanged, and no
partial judgement is returned, so the caller can retry the whole answer.

Costs and latency: one decomposition call, then one call per claim, run concurrently (bounded),
so an answer with 8 claims takes about two calls' latency, not nine. A reply that cannot be read
is retried once with a reminder of the format; identical (claim, context) pairs reuse the
verdict without a call.

Batched mode (``mode=BATCHED``): the claims go to the judge in calls of at most ``batch_size``
(`batched.verify_batch_messages`), with the judge's evidence per claim (chunk ranks and a
reason); a claim the batched reply leaves open is asked again on its own with the per-claim
prompt, as above. An answer of 5 claims then costs 2 calls instead of 6.
"""

import hashlib
from collections.abc import Callable, MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from monitoring.judging.domain import batched
from monitoring.judging.domain.judge_parse import Label, parse_claims, parse_verdict
from monitoring.judging.domain.judge_prompt import (
    decompose_messages,
    decompose_retry_messages,
    format_context,
    verify_messages,
    verify_retry_messages,
)
from monitoring.judging.domain.scoring import ScoreResult, score_labels

DECOMPOSITION_UNPARSEABLE = "decomposition unparseable"

# How the claims are verified: one call per claim (the article's prompt, word for word), or
# all claims of an answer in one call (fewer calls and tokens, with evidence per claim).
PER_CLAIM = "per-claim"
BATCHED = "batched"
MODES = (PER_CLAIM, BATCHED)


def mode_of_prompt_version(version: str) -> str:
    """The mode a run's prompt version belongs to: batched versions end "-b<n>" (every version
    before batched mode existed verified one claim per call)."""
    tail = version.rsplit("-", 1)[-1]
    return BATCHED if tail[:1] == "b" and tail[1:].isdigit() else PER_CLAIM


@dataclass(frozen=True, slots=True)
class CallResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    model: str  # as the endpoint reports it (may name a dated snapshot of the configured model)
    # Of prompt_tokens, those the provider served from its prefix cache (billed cheaper).
    cached_tokens: int = 0
    # False when the endpoint's usage figures could not be believed (usage_figure): the call
    # counts, its tokens are recorded as 0 and the run says how many calls it could not price.
    usage_known: bool = True


# A single call's token count beyond this is no count (a chat completion's context is at most
# a few hundred thousand tokens; 10**7 leaves room for any model to come): an endpoint that
# reports it is not believed, whatever it meant.
MAX_CALL_TOKENS = 10**7


def usage_figure(value: object) -> int | None:
    """A token figure an endpoint reported, or None where it cannot be one: not a whole number
    (a float, a string, a bool), below 0 or above MAX_CALL_TOKENS. Such figures came as -5 and
    10**30 and broke the run at its end (the database's integer overflowed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_CALL_TOKENS else None


JudgeCall = Callable[[list[dict[str, str]]], CallResult]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call as made, for the audit trail: every raw reply, including retried ones."""

    purpose: str  # "decompose" | "verify" | "verify_batch"
    position: int | None  # the claim's position for "verify", the batch's first for a batch
    attempt: int  # 1, or 2 for the retry
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    model: str
    cached_tokens: int = 0
    usage_known: bool = True


@dataclass(frozen=True, slots=True)
class ClaimVerdict:
    position: int  # 0-based, the claim's place in the decomposition
    claim: str
    label: Label
    raw: str  # the reply the label was read from (the retry's, if there was one)
    attempts: int  # calls made for this claim in this judgement: 1, 2, or 0 when cached
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int  # summed over the attempts
    cached: bool
    model: str = ""
    # The judge's evidence, where it gives one (batched mode): the ranks of the chunks the
    # verdict rests on and a sentence why.
    chunks: tuple[int, ...] = ()
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Judgement:
    claims: tuple[ClaimVerdict, ...]
    decomposition_raw: str
    result: ScoreResult
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failed_reason: str | None  # set whenever result.failed
    call_log: tuple[CallRecord, ...] = ()
    cached_tokens: int = 0  # of prompt_tokens
    usage_unknown_calls: int = 0  # of calls, those whose tokens the endpoint misreported


@dataclass(frozen=True, slots=True)
class CachedVerdict:
    label: Label
    raw: str
    model: str
    chunks: tuple[int, ...] = ()
    reason: str = ""


# (language, claim, sha256 of the context): the digest keeps a run-wide cache small when
# contexts are long.
CacheKey = tuple[str, str, str]
VerdictCache = MutableMapping[CacheKey, CachedVerdict]


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
    batch_call: JudgeCall | None = None,
    decomposition: str | None = None,
    on_decomposed: Callable[[str], None] | None = None,
) -> Judgement:
    """Judge one answer against its retrieved chunks (in rank order).

    ``verify_call`` (default ``call``) lets the caller give verifications a smaller output-token
    cap than the decomposition, ``batch_call`` (default ``verify_call``) batched verifications
    one that fits a line per claim. ``cache`` may be shared by the answers of one run; only
    readable verdicts are cached, each as soon as it arrives.

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

    claims = None if decomposition is None else parse_claims(decomposition)
    if claims is not None:
        raw = decomposition or ""
    else:
        raw, claims = _decompose(question, answer, language, call, log)
        if claims is None:
            result = ScoreResult(None, False, True, DECOMPOSITION_UNPARSEABLE, 0, 0)
            return _judgement((), raw, result, log)
        if on_decomposed is not None:
            on_decomposed(raw)

    verdicts, verify_log = _verify_all(
        claims,
        context=format_context(chunks),
        language=language,
        call=verify_call or call,
        concurrency=concurrency,
        cache={} if cache is None else cache,
        batching=None if mode == PER_CLAIM else _Batching(
            chunks, batch_size, batch_call or verify_call or call),
    )
    result = score_labels([v.label for v in verdicts])
    return _judgement(tuple(verdicts), raw, result, log + verify_log)


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
    claims: tuple[ClaimVerdict, ...], raw: str, result: ScoreResult, log: list[CallRecord]
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


@dataclass(frozen=True, slots=True)
class _Batching:
    chunks: Sequence[str]
    size: int
    call: JudgeCall


def _verify_all(
    claims: list[str],
    *,
    context: str,
    language: str,
    call: JudgeCall,
    concurrency: int,
    cache: VerdictCache,
    batching: _Batching | None = None,
) -> tuple[list[ClaimVerdict], list[CallRecord]]:
    digest = hashlib.sha256(context.encode("utf-8", "surrogatepass")).hexdigest()
    verdicts: list[ClaimVerdict | None] = [None] * len(claims)
    pending: list[int] = []
    # Claims from parse_claims are unique, so within one answer a hit can only come from an
    # earlier answer of the same run.
    for position, claim in enumerate(claims):
        hit = cache.get((language, claim, digest))
        if hit is None:
            pending.append(position)
        else:
            verdicts[position] = ClaimVerdict(
                position, claim, hit.label, hit.raw, 0, 0, 0, 0, True, hit.model,
                hit.chunks, hit.reason,
            )

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

    def cached(verdict: ClaimVerdict) -> dict[CacheKey, CachedVerdict]:
        if verdict.label is Label.UNPARSEABLE:
            return {}
        return {(language, verdict.claim, digest): CachedVerdict(
            verdict.label, verdict.raw, verdict.model, verdict.chunks, verdict.reason
        )}

    def settle(verdict: ClaimVerdict, records: list[CallRecord]) -> None:
        verdicts[verdict.position] = verdict
        log.extend(records)
        cache.update(cached(verdict))

    log: list[CallRecord] = []
    if batching is not None and pending:
        # One call per batch of pending claims; what a batch leaves open is asked one by one.
        open_ = []
        for group in batched.batches(pending, batching.size):
            found, left, records = _verify_batch(
                group, claims, batching=batching, language=language
            )
            # A batch's verdicts go to the cache in one update (a caller that stores them
            # stores them together).
            new: dict[CacheKey, CachedVerdict] = {}
            for verdict in found:
                verdicts[verdict.position] = verdict
                new.update(cached(verdict))
            cache.update(new)
            log.extend(records)
            open_ += left
        pending = open_
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
    return [v for v in verdicts if v is not None], log


def _verify_batch(
    group: list[int], claims: list[str], *, batching: _Batching, language: str
) -> tuple[list[ClaimVerdict], list[int], list[CallRecord]]:
    """One batched call for the claims at positions ``group``: the verdicts it gives, the
    positions it leaves open, and its record. The call's tokens and latency are shared out
    over the claims it decided (the first takes the remainder)."""
    reply = batching.call(batched.verify_batch_messages(
        chunks=batching.chunks, claims=[claims[p] for p in group], language=language
    ))
    reading = batched.parse_batch(reply.text, len(group))
    decided = [(group[n - 1], e) for n, e in reading.verdicts.items()]
    share = max(1, len(decided))

    def part(total: int, index: int) -> int:
        return total // share + (total % share if index == 0 else 0)

    found = [
        ClaimVerdict(
            position=position, claim=claims[position], label=evidence.label, raw=reply.text,
            attempts=1, prompt_tokens=part(reply.prompt_tokens, i),
            completion_tokens=part(reply.completion_tokens, i),
            latency_ms=part(reply.latency_ms, i), cached=False, model=reply.model,
            chunks=evidence.chunks, reason=evidence.reason,
        )
        for i, (position, evidence) in enumerate(decided)
    ]
    left = [group[n - 1] for n in reading.missing]
    return found, left, [_record("verify_batch", group[0], 1, reply)]
