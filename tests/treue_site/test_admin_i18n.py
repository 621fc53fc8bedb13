"""The admin in German: its scripts' strings (the two-list selector of experts and team leads)
come from Django's German catalogue, completed by Treue's locale/de/LC_MESSAGES/djangojs.po
(Django reads LOCALE_PATHS after the packages' own catalogues)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import django.contrib.admin
import pytest
from django.contrib.auth.models import User
from django.test import Client

SELECTOR_JS = Path(django.contrib.admin.__file__).parent / "static/admin/js/SelectFilter2.js"


def catalog(client: Client) -> dict[str, str]:
    response = client.get("/admin/jsi18n/")
    assert response.status_code == 200
    found = re.search(r"const newcatalog = (\{.*?\});", response.content.decode(), re.DOTALL)
    return json.loads(found[1]) if found else {}  # none at all in English, the source


def selector_strings() -> set[str]:
    source = SELECTOR_JS.read_text()
    strings = {m[1] for m in re.finditer(r"gettext\('((?:[^'\\]|\\.)*)'\)", source)}
    strings |= {m[1] for m in re.finditer(r'gettext\("((?:[^"\\]|\\.)*)"\)', source)}
    return {s.replace("\\'", "'").replace('\\"', '"') for s in strings}


@pytest.mark.django_db
def test_the_admins_selector_speaks_german() -> None:
    staff = User.objects.create_user("verwaltung", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    german = catalog(client)
    # What showed in English: the selector's help texts and its "all" links.
    assert german["Choose all %s"] == "Alle %s auswählen"
    assert german["Remove all %s"] == "Alle %s entfernen"
    assert german['Choose %s by selecting them and then select the "Choose" arrow button.'] == (
        "Markieren Sie %s und klicken Sie dann auf den Pfeil „Auswählen“.")
    # Every string of the selector script has its German (Django's or Treue's): a Django update
    # that words one anew shows here, not as English in the German admin.
    strings = selector_strings()
    assert len(strings) >= 10
    assert sorted(strings - set(german)) == []
    # Django's own German is still read (Treue's catalogue only adds to it).
    assert german["Filter"] == "Filter" and german["Available %s"] == "Verfügbare %s"


@pytest.mark.django_db
def test_in_english_the_admins_scripts_stay_english() -> None:
    staff = User.objects.create_user("verwaltung", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert "Choose all %s" not in catalog(client)
