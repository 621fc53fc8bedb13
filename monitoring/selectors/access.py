"""Who may see what: the one home of the rule that a person sees only the use cases they are
assigned to (and the answers in them), that an expert sees no judge score of an answer still open
in their blind review, and which service a key belongs to. Every page, export, API and report
asks here."""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import Col
from django.utils import timezone

from monitoring import extensions
from monitoring.models import Answer, Service, UseCase


class Role(Enum):
    """In what a person may see a use case: as anyone assigned to it, as its team lead, as one of
    its domain experts."""

    ANY = "any"
    LEAD = "lead"
    EXPERT = "expert"


def use_cases_for_user(
    *, user: User | AnonymousUser, role: Role = Role.ANY
) -> QuerySet[UseCase]:
    """The use cases a person may see in ``role``. Staff see and lead every use case; an expert's
    queue holds only those they are assigned to as expert, staff or not."""
    if not user.is_authenticated:
        return UseCase.objects.none()
    if role is Role.EXPERT:
        return UseCase.objects.filter(experts=user)
    if user.is_staff:
        return UseCase.objects.all()
    if role is Role.LEAD:
        return UseCase.objects.filter(team_leads=user)
    return UseCase.objects.filter(Q(experts=user) | Q(team_leads=user)).distinct()


def user_sees(*, user: User | AnonymousUser, use_case: UseCase, role: Role = Role.ANY) -> bool:
    """Whether the person may see ``use_case`` in ``role``."""
    return use_cases_for_user(user=user, role=role).filter(pk=use_case.pk).exists()


def user_leads(*, user: User | AnonymousUser, use_case: UseCase | None = None) -> bool:
    """Whether the person leads ``use_case`` (staff lead all), or with none given any use case
    (staff always): they tune it, rescore it, read its estimates and investigate it."""
    if use_case is None:
        return bool(user.is_authenticated and (
            user.is_staff or use_cases_for_user(user=user, role=Role.LEAD).exists()
        ))
    return user_sees(user=user, use_case=use_case, role=Role.LEAD)


def service_sees(*, service: Service, use_case: UseCase) -> bool:
    """Whether a service key may send to and read the estimates of ``use_case``."""
    return service.use_cases.filter(pk=use_case.pk).exists()


def use_case_get_for_user(*, user: User | AnonymousUser, slug: str) -> UseCase | None:
    return use_cases_for_user(user=user).filter(slug=slug).first()


def blind_answer_ids(*, user: User | AnonymousUser) -> set[int]:
    """Answers whose judge results this user must not see yet (blind review, against
    anchoring). The rule is the weekly review's (review.selectors.reviews.blind_answer_ids), asked
    through monitoring/extensions.py; without it registered no answer is blind. Every page,
    export and report asks here."""
    blind: set[int] = set()
    for answers in extensions.registry.blind_answers.values():
        blind |= answers(user=user)
    return blind


def answer_get_for_user(*, user: User | AnonymousUser, pk: int) -> Answer | None:
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


def answer_get_for_service_by_external_id(
    *, service_id: int, external_id: str
) -> Answer | None:
    """The one answer the service sent under ``external_id`` (AnswerKey keeps it unique per
    service; found as ingest finds a replay's, by the index on service and external id)."""
    return (
        Answer.objects.filter(service_id=service_id, external_id=external_id)
        .select_related("use_case", "current_run")
        .prefetch_related("chunks", "current_run__claims")
        .first()
    )


@dataclass(frozen=True)
class KeyOwner:
    service: Service
    use_cases: dict[str, UseCase]  # the active use cases it may send to, by slug


def service_for_key(prefix: str, *, previous: bool = False) -> KeyOwner | None:
    """The active service holding the key with this prefix and the active use cases it may send
    to; None when there is none. With ``previous``: the service whose key before the last
    rotation has this prefix and is still in its grace period.

    One plain SQL query, as it runs for every ingest request and the ORM's query building cost
    more than the query: the service, left-joined to its links and active use cases. The values
    pass through the fields' database converters as the ORM's would (SQLite's datetimes).
    """
    with connection.cursor() as cursor:
        if previous:
            cursor.execute(
                _KeyOwnerQuery.sql(connection.vendor, "previous_key_prefix")
                + f" AND s.{connection.ops.quote_name('previous_key_expires_at')} > %s",
                [prefix, timezone.now()],
            )
        else:
            cursor.execute(_KeyOwnerQuery.sql(connection.vendor, "key_prefix"), [prefix])
        rows = cursor.fetchall()
    if not rows:
        return None
    service = _KeyOwnerQuery.service.build(rows[0])
    allowed = {}
    for row in rows:
        if row[_KeyOwnerQuery.service.width] is not None:
            use_case = _KeyOwnerQuery.use_case.build(row)
            allowed[use_case.slug] = use_case
    return KeyOwner(service, allowed)


class _Columns:
    """A model's concrete columns at an offset of a plain SQL row, and how to build the model
    instance from them."""

    def __init__(self, model: type[Service] | type[UseCase], alias: str, offset: int) -> None:
        self.model = model
        self.alias = alias
        self.offset = offset
        self.fields = list(model._meta.concrete_fields)
        self.width = offset + len(self.fields)

    def select(self) -> str:
        q = connection.ops.quote_name
        # str(): a concrete field always has its column (None is for fields without one).
        return ", ".join(f"{self.alias}.{q(str(f.column))}" for f in self.fields)

    def build(self, row: Sequence[Any]) -> Any:
        values = list(row[self.offset : self.width])
        for i, column, converters in _converters(self.model, connection.vendor):
            for convert in converters:
                values[i] = convert(values[i], column, connection)
        return self.model.from_db(connection.alias, [f.attname for f in self.fields], values)


@functools.cache
def _converters(
    model: type[Service] | type[UseCase], vendor: str
) -> list[tuple[int, Col, list[Any]]]:
    """The database converters of the model's concrete columns (by position) on this vendor."""
    found = []
    for i, f in enumerate(model._meta.concrete_fields):
        column = Col(model._meta.db_table, f)
        converters = connection.ops.get_db_converters(column) + f.get_db_converters(connection)
        if converters:
            found.append((i, column, converters))
    return found


class _KeyOwnerQuery:
    service = _Columns(Service, "s", 0)
    use_case = _Columns(UseCase, "u", service.width)

    @staticmethod
    @functools.cache
    def sql(vendor: str, prefix_column: str) -> str:
        # Built on first use, per database vendor (quoting), not at import.
        q = connection.ops.quote_name
        links = Service.use_cases.through._meta
        return (
            f"SELECT {_KeyOwnerQuery.service.select()}, {_KeyOwnerQuery.use_case.select()}"
            f" FROM {q(Service._meta.db_table)} s"
            f" LEFT JOIN {q(links.db_table)} l"
            f" ON l.{q(links.get_field('service').column)} = s.{q('id')}"
            f" LEFT JOIN {q(UseCase._meta.db_table)} u"
            f" ON u.{q('id')} = l.{q(links.get_field('usecase').column)} AND u.{q('active')}"
            f" WHERE s.{q(prefix_column)} = %s AND s.{q('active')}"
        )
