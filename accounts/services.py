"""Single sign-on's writes: the user of an identity provider's account, and the roles its
groups give, kept equal to the groups at every login (the provider is the source of truth for
its users' roles)."""

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts.domain.groups import Roles
from accounts.models import OidcIdentity
from monitoring.models import UseCase

logger = logging.getLogger(__name__)

_USERNAME = re.compile(r"[\w.@+-]+")
USERNAME_LENGTH = 150


@dataclass(frozen=True)
class RoleChanges:
    staff: bool | None  # the new value where it changed, else None
    leads_added: tuple[str, ...] = ()
    leads_removed: tuple[str, ...] = ()
    experts_added: tuple[str, ...] = ()
    experts_removed: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()  # use cases the groups name and Treue does not have

    @property
    def any(self) -> bool:
        return self.staff is not None or bool(
            self.leads_added or self.leads_removed or self.experts_added or self.experts_removed
        )


def sso_roles_sync(*, user: User, roles: Roles) -> RoleChanges:
    """Give the user exactly the roles of these groups: staff or not, and team lead and expert
    of exactly the use cases they name (ones that do not exist are ignored). Never touches
    superuser."""
    with transaction.atomic():
        wanted = roles.leads | roles.experts
        known = set(UseCase.objects.filter(slug__in=wanted).values_list("slug", flat=True))
        leads_before = set(user.led_use_cases.values_list("slug", flat=True))
        experts_before = set(user.expert_use_cases.values_list("slug", flat=True))
        leads, experts = roles.leads & known, roles.experts & known
        if leads != leads_before:
            user.led_use_cases.set(UseCase.objects.filter(slug__in=leads))
        if experts != experts_before:
            user.expert_use_cases.set(UseCase.objects.filter(slug__in=experts))
        staff = None
        if user.is_staff != roles.staff:
            user.is_staff = staff = roles.staff
            user.save(update_fields=["is_staff"])
    return RoleChanges(
        staff=staff,
        leads_added=tuple(sorted(leads - leads_before)),
        leads_removed=tuple(sorted(leads_before - leads)),
        experts_added=tuple(sorted(experts - experts_before)),
        experts_removed=tuple(sorted(experts_before - experts)),
        unknown=tuple(sorted(wanted - known)),
    )


class Refused(Exception):
    """A login the provider vouched for that Treue does not let in; the message says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # "no_role" or "inactive"


def sso_login(*, issuer: str, claims: Mapping[str, Any], roles: Roles,
              groups: Any = None) -> User:
    """The user of the provider's account `claims["sub"]` (made at the first login), its
    names and e-mail from the claims and its roles from the groups. Refused (after the roles
    were taken away) when the groups give no Treue role, and for a deactivated user."""
    subject = str(claims["sub"])
    with transaction.atomic():
        identity = (
            OidcIdentity.objects.select_related("user").select_for_update()
            .filter(issuer=issuer, subject=subject).first()
        )
        if identity is None:
            if roles.empty:
                raise Refused("no_role")
            user = User(username=_free_username(claims, subject))
            user.set_unusable_password()  # only the provider logs this user in
            _names(user, claims)
            user.save()
            identity = OidcIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            logger.info("single sign-on: new user %s for %s", user.username, identity)
        else:
            user = identity.user
            if _names(user, claims):
                user.save(update_fields=["email", "first_name", "last_name"])
        identity.last_groups = groups if isinstance(groups, list) else []
        identity.last_login_at = timezone.now()
        identity.save(update_fields=["last_groups", "last_login_at"])
        changes = sso_roles_sync(user=user, roles=roles)
    if changes.any or changes.unknown or roles.unreadable:
        logger.info(
            "single sign-on: roles of %s from the groups of %s: %s; unknown use cases %s;"
            " groups without a role %s", user.username, issuer, changes, changes.unknown,
            roles.unreadable,
        )
    if roles.empty:
        raise Refused("no_role")
    if not user.is_active:
        raise Refused("inactive")
    return user


def _names(user: User, claims: Mapping[str, Any]) -> bool:
    """Take e-mail and names from the claims; True when one changed."""
    values = {
        "email": _text(claims.get("email"), 254),
        "first_name": _text(claims.get("given_name"), 150),
        "last_name": _text(claims.get("family_name"), 150),
    }
    changed = False
    for name, value in values.items():
        if value is not None and getattr(user, name) != value:
            setattr(user, name, value)
            changed = True
    return changed


def _text(value: Any, limit: int) -> str | None:
    return value.strip()[:limit] if isinstance(value, str) else None


def _free_username(claims: Mapping[str, Any], subject: str) -> str:
    """`preferred_username`, else the e-mail, else the subject, as Django allows usernames;
    with -2, -3, … when taken (a local account of that name is never taken over)."""
    for candidate in (claims.get("preferred_username"), claims.get("email"), subject):
        if isinstance(candidate, str):
            base = "".join(_USERNAME.findall(candidate.strip()))[:USERNAME_LENGTH - 4]
            if base:
                break
    else:
        base = "sso"
    name, n = base, 1
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name
