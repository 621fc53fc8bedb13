"""Who may see which use case, and as what (monitoring/selectors/access.py): the one rule every
page, export, API and report asks."""

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from monitoring.selectors.access import (
    Role,
    service_sees,
    use_cases_for_user,
    user_leads,
    user_sees,
)
from tests.support.world import WorldBuilder

pytestmark = pytest.mark.django_db


def test_each_role_sees_what_it_is_assigned_to(world_builder: WorldBuilder) -> None:
    w = world_builder
    a, b, c = w.use_case("a", "A"), w.use_case("b", "B"), w.use_case("c", "C")
    both = w.user("both", expert_of=[a], lead_of=[b])
    staff = w.user("staff", is_staff=True, expert_of=[c])
    nobody = w.user("nobody")
    service, _ = w.service("bot", a)

    def slugs(user: Any, role: Role = Role.ANY) -> list[str]:
        return sorted(u.slug for u in use_cases_for_user(user=user, role=role))

    assert slugs(both) == ["a", "b"]
    assert slugs(both, Role.LEAD) == ["b"]
    assert slugs(both, Role.EXPERT) == ["a"]
    # Staff see and lead all; their review queue holds only what they are experts of.
    assert slugs(staff) == slugs(staff, Role.LEAD) == ["a", "b", "c"]
    assert slugs(staff, Role.EXPERT) == ["c"]
    for outsider in (nobody, AnonymousUser()):
        assert slugs(outsider) == slugs(outsider, Role.LEAD) == slugs(outsider, Role.EXPERT) == []
        assert not user_leads(user=outsider)

    assert user_sees(user=both, use_case=a) and not user_sees(user=both, use_case=c)
    assert user_leads(user=both, use_case=b) and not user_leads(user=both, use_case=a)
    assert user_leads(user=both) and user_leads(user=staff)
    assert not user_leads(user=w.user("expert-only", expert_of=[a]))
    assert user_leads(user=staff, use_case=a)
    assert service_sees(service=service, use_case=a) and not service_sees(service=service,
                                                                          use_case=b)
