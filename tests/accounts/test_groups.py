"""The roles a provider's group claim gives (accounts.domain.groups), table by table."""

import pytest

from accounts.domain.groups import Roles, claim_at, roles_from_groups


@pytest.mark.parametrize(("groups", "roles"), [
    (["treue:staff"], Roles(staff=True)),
    (["treue:lead:kundenservice", "treue:expert:vertrieb"],
     Roles(leads=frozenset({"kundenservice"}), experts=frozenset({"vertrieb"}))),
    # Keycloak's full group paths, and slashes instead of colons.
    (["/treue/lead/kundenservice", "treue/expert/vertrieb"],
     Roles(leads=frozenset({"kundenservice"}), experts=frozenset({"vertrieb"}))),
    # Not Treue's: left alone; Treue's prefix without a role: reported, not guessed.
    (["admins", "treue-lead:x", "treue:owner:x", "treue:lead:", "treue:staff:x",
      "treue:lead:a:b"],
     Roles(unreadable=("treue:owner:x", "treue:lead:", "treue:staff:x", "treue:lead:a:b"))),
    # Blanks around, duplicates, and values that are not strings.
    ([" treue:lead:a ", "treue:lead:a", 7, None, {"x": 1}, ""], Roles(leads=frozenset({"a"}))),
    ("treue:staff", Roles(staff=True)),  # one group sent as a string
    (None, Roles()),
    ({"treue:staff": True}, Roles()),
])
def test_roles_from_groups(groups, roles):
    assert roles_from_groups(groups) == roles


def test_a_prefix_of_ones_own_and_a_map_of_group_ids():
    assert roles_from_groups(["app/treue/staff", "treue:staff"], prefix="app:treue:") == Roles(
        staff=True)
    ids = {"0b6f-11": "lead:kundenservice", "77aa": "staff", "99": "boss"}
    assert roles_from_groups(["0b6f-11", "77aa", "99", "12"], group_map=ids) == Roles(
        staff=True, leads=frozenset({"kundenservice"}), unreadable=("99",))


def test_empty_means_no_role():
    assert Roles().empty and Roles(unreadable=("treue:x",)).empty
    assert not Roles(staff=True).empty and not Roles(experts=frozenset({"a"})).empty


@pytest.mark.parametrize(("path", "value"), [
    ("groups", ["a"]),
    ("realm_access.roles", ["treue:staff"]),
    ("realm_access.missing", None),
    ("groups.0", None),
    ("nothing", None),
])
def test_claim_at(path, value):
    claims = {"groups": ["a"], "realm_access": {"roles": ["treue:staff"]}}
    assert claim_at(claims, path) == value
