"""Treue roles from an identity provider's group claims (plain Python, no Django).

A groups claim is a list of strings. With the prefix ``treue:`` (a setting):

- ``treue:staff``: staff (admin pages, /metrics), never superuser;
- ``treue:lead:<slug>``: team lead of the use case ``<slug>``;
- ``treue:expert:<slug>``: expert of the use case ``<slug>``.

``/`` separates as well as ``:`` (Keycloak's full group paths, ``/treue/lead/kundenservice``,
the leading ``/`` dropped). Groups without the prefix are not Treue's and are left alone.
Identity providers that send group ids instead of names (Entra ID) map them with a table,
``{"<group id>": "lead:kundenservice"}``. What starts with the prefix and names no role is
reported, not guessed.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

STAFF = "staff"
LEAD = "lead"
EXPERT = "expert"


@dataclass(frozen=True)
class Roles:
    """What a login's groups make of the user."""

    staff: bool = False
    leads: frozenset[str] = frozenset()  # use-case slugs
    experts: frozenset[str] = frozenset()
    unreadable: tuple[str, ...] = field(default=())  # Treue's prefix, but no role

    @property
    def empty(self) -> bool:
        return not (self.staff or self.leads or self.experts)


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The claim at a dotted path (``realm_access.roles``); None where there is none."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _role(text: str) -> tuple[str, str] | None:
    """("staff", "") or ("lead"/"expert", slug) from the part after the prefix."""
    word, _, slug = text.partition(":")
    if word == STAFF and not slug:
        return STAFF, ""
    if word in (LEAD, EXPERT) and slug and ":" not in slug:
        return word, slug
    return None


def roles_from_groups(
    groups: Any, *, prefix: str = "treue:", group_map: Mapping[str, str] | None = None
) -> Roles:
    """The roles in a groups claim (any JSON value: what is not a list of strings gives
    none)."""
    if isinstance(groups, str):
        groups = [groups]  # a single group sent as a string
    if not isinstance(groups, list):
        return Roles()
    names = _normalised_prefix(prefix)
    staff = False
    leads: set[str] = set()
    experts: set[str] = set()
    unreadable: list[str] = []
    for group in _strings(groups):
        if group_map and group in group_map:
            rest: str | None = group_map[group]
        else:
            rest = _after_prefix(group, names)
        if rest is None:
            continue
        role = _role(rest)
        if role is None:
            unreadable.append(group)
        elif role[0] == STAFF:
            staff = True
        elif role[0] == LEAD:
            leads.add(role[1])
        else:
            experts.add(role[1])
    return Roles(staff=staff, leads=frozenset(leads), experts=frozenset(experts),
                 unreadable=tuple(unreadable))


def _strings(values: Iterable[Any]) -> Iterable[str]:
    return (v.strip() for v in values if isinstance(v, str) and v.strip())


def _normalised_prefix(prefix: str) -> str:
    return prefix.replace("/", ":").lstrip(":")


def _after_prefix(group: str, prefix: str) -> str | None:
    """The group without Treue's prefix, with ``/`` read as ``:``; None: not Treue's."""
    text = group.replace("/", ":").lstrip(":")
    if not prefix:
        return text
    if text.startswith(prefix):
        return text[len(prefix):]
    return None
