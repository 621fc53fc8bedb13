"""Reads of the investigations app: which answers an investigation would re-ask and what that
costs (shown before it starts), the list per use case, progress, and the report."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser
from django.db.models import Count, Q, QuerySet, Sum
from django.utils.translation import get_language

from dashboard.domain.highlight import Segment, segments
from dashboard.domain.statistics.cells import wilson
from investigations.domain.consistency import compare as consistency
from investigations.models import Investigation, Question
from judging.selectors.prices import price_currencies, prices_for
from monitoring.domain.prices import price_key
from monitoring.models import Answer, JudgePrice, UseCase
from monitoring.selectors.access import blind_answer_ids, use_cases_for_user

# A rough token estimate where the stored answer does not say: ~4 characters per token.
CHARS_PER_TOKEN = 4
# The contradiction check's instructions and its reply (one word, a short reason).
JUDGE_PROMPT_OVERHEAD_TOKENS = 250
JUDGE_REPLY_TOKENS = 40

SKIP_NO_MESSAGES = "no_messages"
SKIP_ANONYMISED = "anonymised"

User = AuthUser | AnonymousUser


class SelectionError(ValueError):
    """The chosen answers cannot form an investigation (named in the message)."""


@dataclass
class Plan:
    """What starting an investigation would do. Built again on start, never trusted from the
    form: the page shows it, the start recomputes it."""

    use_case: UseCase
    selection: str
    requested: int
    samples: int
    temperature: float
    generator_model: str
    judge_model: str
    answers: list[Answer] = field(default_factory=list)
    skipped: list[tuple[Answer, str]] = field(default_factory=list)
    generator_calls: int = 0
    judge_calls: int = 0
    estimated_cost: Decimal | None = None
    currency: str = ""

    @property
    def calls(self) -> int:
        return self.generator_calls + self.judge_calls


def model_prices(models: Iterable[str]) -> dict[str, JudgePrice]:
    """The prices of these models, by the judge tier's one matching rule."""
    return prices_for(models=models)


def price_of(
    prices: dict[str, JudgePrice], model: str, prompt_tokens: float, completion_tokens: float,
    cached_tokens: float = 0,
) -> Decimal | None:
    price = prices.get(price_key(model))
    if price is None:
        return None
    return price.cost(
        prompt_tokens=round(prompt_tokens), completion_tokens=round(completion_tokens),
        cached_tokens=round(cached_tokens),
    )


def currency_of(models: set[str]) -> str:
    """The one currency the models' prices are in; "" when unknown or mixed."""
    currencies = set(price_currencies(models=models).values())
    return currencies.pop() if len(currencies) == 1 else ""


def _answer_tokens(answer: Answer) -> tuple[int, int]:
    """(prompt, completion) tokens of re-asking this answer once, estimated from what is
    stored: the messages' characters, and the answer's own token count where known."""
    prompt_chars = sum(len(str(m.get("content", ""))) for m in answer.messages or [])
    tokens = answer.token_data or {}
    completion = len(tokens.get("lp") or []) if isinstance(tokens, dict) else 0
    if not completion:
        completion = len(answer.text) // CHARS_PER_TOKEN
    return max(1, prompt_chars // CHARS_PER_TOKEN), max(1, completion)


def selection_queryset(
    *, use_case: UseCase, selection: str, answer_ids: Sequence[int] = (),
    user: User | None = None,
) -> QuerySet[Answer]:
    """The answers a selection takes, newest first. Chosen by score, it leaves out the answers
    `user` reviews blind: being picked as "below the threshold" would give their score away."""
    answers = Answer.objects.filter(use_case=use_case)
    if selection == Investigation.Selection.FLAGGED:
        answers = answers.filter(flagged=True)
    elif selection == Investigation.Selection.BELOW:
        answers = answers.filter(score__lt=use_case.action_threshold)
        blind = blind_answer_ids(user=user) if user is not None else set()
        if blind:
            answers = answers.exclude(pk__in=blind)
    elif selection == Investigation.Selection.CHOSEN:
        answers = answers.filter(pk__in=list(answer_ids))
    return answers.order_by("-created_at", "-pk")


def investigation_plan(
    *,
    use_case: UseCase,
    selection: str,
    n: int,
    samples: int,
    temperature: float,
    generator_model: str = "",
    answer_ids: Sequence[int] = (),
    user: User | None = None,
) -> Plan:
    if selection == Investigation.Selection.CHOSEN:
        ids = list(dict.fromkeys(answer_ids))
        found = set(
            Answer.objects.filter(use_case=use_case, pk__in=ids).values_list("pk", flat=True)
        )
        missing = [i for i in ids if i not in found]
        if missing:
            raise SelectionError(
                f"Antworten gehören nicht zum Anwendungsfall: {', '.join(map(str, missing[:10]))}"
            )
        n = len(ids)
    limit = min(n, settings.TREUE_INVESTIGATION_MAX_QUESTIONS)
    chosen = list(
        selection_queryset(
            use_case=use_case, selection=selection, answer_ids=answer_ids, user=user
        ).defer("token_data")[:limit]
    )
    plan = Plan(
        use_case=use_case,
        selection=selection,
        requested=n,
        samples=samples,
        temperature=temperature,
        generator_model=generator_model.strip(),
        judge_model=settings.TREUE_JUDGE_MODEL,
    )
    ids_with_messages = []
    for answer in chosen:
        if answer.anonymised_at is not None:
            plan.skipped.append((answer, SKIP_ANONYMISED))
        elif answer.messages:
            plan.answers.append(answer)
            ids_with_messages.append(answer.pk)
        else:
            plan.skipped.append((answer, SKIP_NO_MESSAGES))
    plan.generator_calls = len(plan.answers) * samples
    plan.judge_calls = len(plan.answers)  # at most: only where the values do not decide
    plan.estimated_cost = _estimate_cost(plan, ids_with_messages)
    models = {plan.generator_model or a.model for a in plan.answers} | {plan.judge_model}
    plan.currency = currency_of(models)
    if not plan.currency:
        plan.estimated_cost = None  # prices in several currencies do not add up
    return plan


def _estimate_cost(plan: Plan, ids: list[int]) -> Decimal | None:
    prices = model_prices({plan.generator_model or a.model for a in plan.answers}
                          | {plan.judge_model})
    total = Decimal(0)
    token_data = dict(Answer.objects.filter(pk__in=ids).values_list("pk", "token_data"))
    for answer in plan.answers:
        answer.token_data = token_data.get(answer.pk)
        prompt, completion = _answer_tokens(answer)
        model = plan.generator_model or answer.model
        generation = price_of(prices, model, prompt, completion)
        judge_prompt = (
            JUDGE_PROMPT_OVERHEAD_TOKENS + len(answer.question) // CHARS_PER_TOKEN
            + plan.samples * completion
        )
        judging = price_of(prices, plan.judge_model, judge_prompt, JUDGE_REPLY_TOKENS)
        if generation is None or judging is None:
            return None
        total += generation * plan.samples + judging
    return total


def investigations_for_user(
    *, user: User, use_case: UseCase | None = None
) -> QuerySet[Investigation]:
    permitted = use_cases_for_user(user=user)
    investigations = Investigation.objects.filter(use_case__in=permitted)
    if use_case is not None:
        investigations = investigations.filter(use_case=use_case)
    return investigations.select_related("use_case", "created_by").annotate(
        total=Count("questions", filter=~Q(questions__status=Question.Status.SKIPPED)),
        skipped=Count("questions", filter=Q(questions__status=Question.Status.SKIPPED)),
        done=Count(
            "questions",
            filter=Q(
                questions__status__in=[
                    Question.Status.DONE, Question.Status.FAILED, Question.Status.CANCELLED
                ]
            ),
        ),
        consistent_n=Count("questions", filter=Q(questions__consistent=True)),
        inconsistent_n=Count("questions", filter=Q(questions__consistent=False)),
        spent=Sum("questions__cost"),
    )


@dataclass(frozen=True)
class Progress:
    total: int
    finished: int  # done, failed or cancelled
    status: str
    cancelled: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"total": self.total, "finished": self.finished, "status": self.status,
                "cancelled": self.cancelled}


def investigation_progress(*, investigation: Investigation) -> Progress:
    counts = dict(
        investigation.questions.values_list("status").annotate(n=Count("pk")).order_by()
    )
    total = sum(n for status, n in counts.items() if status != Question.Status.SKIPPED)
    finished = sum(
        counts.get(s, 0)
        for s in (Question.Status.DONE, Question.Status.FAILED, Question.Status.CANCELLED)
    )
    return Progress(
        total=total,
        finished=finished,
        status=investigation.status,
        cancelled=counts.get(Question.Status.CANCELLED, 0),
    )


@dataclass(frozen=True)
class Rate:
    consistent: int
    n: int
    low: float | None
    high: float | None

    @property
    def share(self) -> float | None:
        return self.consistent / self.n if self.n else None


@dataclass(frozen=True)
class Table2x2:
    """Rows: inconsistent, consistent; columns: the other signal yes, no."""

    label_yes: str
    label_no: str
    cells: tuple[tuple[int, int], tuple[int, int]]

    @property
    def n(self) -> int:
        return sum(sum(row) for row in self.cells)


@dataclass
class Report:
    investigation: Investigation
    progress: Progress
    rate: Rate
    questions: list[Question]
    skipped: list[Question]
    by_flag: Table2x2
    by_score: Table2x2
    unscored: int
    hidden: int  # answers the reader reviews blind: not in by_score, no score shown
    generator_calls: int
    judge_calls: int
    cost: Decimal | None
    cost_known: bool
    currency: str
    usage_unknown_calls: int = 0  # calls whose tokens, and so cost, are not in the figures


def investigation_report(*, investigation: Investigation, user: User | None = None) -> Report:
    """The report as `user` may see it: an answer that user reviews blind shows no score and
    is left out of the table by score (`hidden` counts them), as on every other page."""
    blind = blind_answer_ids(user=user) if user is not None else set()
    questions = list(
        investigation.questions.select_related("answer").defer(
            "answer__token_data", "answer__messages"
        )
    )
    skipped = [q for q in questions if q.status == Question.Status.SKIPPED]
    asked = [q for q in questions if q.status != Question.Status.SKIPPED]
    decided = [q for q in asked if q.consistent is not None]
    consistent = sum(1 for q in decided if q.consistent)
    low, high = wilson(consistent, len(decided)) if decided else (None, None)
    # Inconsistent first (what the team lead must read), then undecided, then consistent.
    order = {False: 0, None: 1, True: 2}
    asked.sort(key=lambda q: (order[q.consistent], q.position))
    for q in asked:
        q.samples_view = _samples_view(q)  # type: ignore[attr-defined]  # shown by the template
        q.blind = q.answer_id in blind  # type: ignore[attr-defined]  # shown by the template
        q.reason_shown = _reason_shown(q)  # type: ignore[attr-defined]  # shown by the template
    threshold = investigation.use_case.action_threshold
    flag = [[0, 0], [0, 0]]
    score = [[0, 0], [0, 0]]
    unscored = hidden = 0
    for q in decided:
        row = 0 if not q.consistent else 1
        flag[row][0 if q.answer.flagged else 1] += 1
        if q.answer_id in blind:
            hidden += 1
        elif q.answer.score is None:
            unscored += 1
        else:
            score[row][0 if q.answer.score < threshold else 1] += 1
    costs = [q.cost for q in asked if q.generator_calls or q.judge_calls]
    return Report(
        investigation=investigation,
        progress=investigation_progress(investigation=investigation),
        rate=Rate(consistent=consistent, n=len(decided), low=low, high=high),
        questions=asked,
        skipped=skipped,
        by_flag=Table2x2("markiert", "nicht markiert", _cells(flag)),
        by_score=Table2x2("unter Schwelle", "über Schwelle", _cells(score)),
        unscored=unscored,
        hidden=hidden,
        generator_calls=sum(q.generator_calls for q in asked),
        judge_calls=sum(q.judge_calls for q in asked),
        cost=sum((c for c in costs if c is not None), Decimal(0)),
        cost_known=all(c is not None for c in costs),
        usage_unknown_calls=sum(q.usage_unknown_calls for q in asked),
        currency=currency_of(
            {q.generator_model for q in asked if q.generator_model}
            | {investigation.judge_model}
        ),
    )


def _reason_shown(question: Question) -> str:
    """The verdict's reason in the reader's language (the page's), not the investigation's: the
    words are put together again from the stored kind and detail. A question decided before
    they were stored keeps its reason as written."""
    verdict = (question.comparison or {}).get("verdict") or {}
    try:
        return consistency.reason_text(
            verdict["kind"], verdict.get("detail", ""), (get_language() or "de")[:2]
        )
    except (KeyError, TypeError, ValueError):
        return question.reason


def _samples_view(question: Question) -> list[list[Segment]]:
    """Each sample's text in pieces, the values that differ between samples marked."""
    differing = (question.comparison or {}).get("differing") or []
    view = []
    for index, sample in enumerate(question.sample_data or []):
        spans = differing[index] if index < len(differing) else []
        view.append(segments(
            str(sample.get("text", "")),
            [{"position": span[0], "end": span[1], "probability": 0.0} for span in spans
             if isinstance(span, list | tuple) and len(span) == 2],
        ))
    return view


def _cells(rows: list[list[int]]) -> tuple[tuple[int, int], tuple[int, int]]:
    return (rows[0][0], rows[0][1]), (rows[1][0], rows[1][1])
