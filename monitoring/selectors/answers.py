"""Reads of answers and use cases. Every query a person triggers goes through the use cases that
person may see: staff see all, others those they are assigned to as expert or team lead."""

from datetime import date

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from monitoring.models import Answer, UseCase


def use_cases_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[UseCase]:
    if not user.is_authenticated:
        return UseCase.objects.none()
    if user.is_staff:
        return UseCase.objects.all()
    return UseCase.objects.filter(Q(experts=user) | Q(team_leads=user)).distinct()


def use_case_get_for_user(
    *, user: AbstractBaseUser | AnonymousUser, slug: str
) -> UseCase | None:
    return use_cases_for_user(user=user).filter(slug=slug).first()


def answer_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    use_case: str | None = None,
    flagged: bool | None = None,
    sampled: bool | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[Answer]:
    answers = Answer.objects.filter(use_case__in=use_cases_for_user(user=user))
    if use_case:
        answers = answers.filter(use_case__slug=use_case)
    if flagged is not None:
        answers = answers.filter(flagged=flagged)
    if sampled is not None:
        answers = answers.filter(sampled=sampled)
    if date_from:
        answers = answers.filter(created_at__date__gte=date_from)
    if date_to:
        answers = answers.filter(created_at__date__lte=date_to)
    return answers.select_related("use_case", "service").defer(
        "messages", "token_data", "metadata"
    )


def answer_get_for_user(*, user: AbstractBaseUser | AnonymousUser, pk: int) -> Answer | None:
    return (
        Answer.objects.filter(pk=pk, use_case__in=use_cases_for_user(user=user))
        .select_related("use_case", "service", "current_run")
        .prefetch_related("chunks")
        .first()
    )


def answer_get_for_service(*, service_id: int, pk: int) -> Answer | None:
    return (
        Answer.objects.filter(pk=pk, service_id=service_id)
        .select_related("use_case", "current_run")
        .prefetch_related("chunks", "current_run__claims")
        .first()
    )
