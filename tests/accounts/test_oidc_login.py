"""Single sign-on against a real OpenID provider (tests/support/oidc_provider.py): the whole
authorization-code flow with PKCE and nonce, over real HTTP for the token, the keys and the
userinfo; the roles follow the provider's groups at every login."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import OidcIdentity
from monitoring.services.use_cases import use_case_create

# integration: the whole sign-in against a real OpenID provider served in a thread.
pytestmark = [pytest.mark.django_db, pytest.mark.integration]


@pytest.fixture
def use_cases(db: None) -> dict[str, Any]:
    return {
        slug: use_case_create(slug=slug, name=slug.title(), language="de")
        for slug in ("kundenservice", "vertrieb", "technik")
    }


def slugs(manager: Any) -> set[str]:
    return set(manager.values_list("slug", flat=True))


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_the_first_login_makes_the_user_with_the_roles_of_its_groups(oidc_provider, use_cases):
    oidc_provider.user("anna-123", email="anna@example.org", preferred_username="anna",
                       given_name="Anna", family_name="Berg",
                       groups=["treue:lead:kundenservice", "treue:expert:vertrieb", "other"])
    client = Client()
    done = oidc_provider.login(client, "anna-123", next_url="/answers/")
    assert done.status_code == 302 and done["Location"] == "/answers/"
    user = User.objects.get(oidc_identity__subject="anna-123")
    assert (user.username, user.email, user.first_name, user.last_name) == (
        "anna", "anna@example.org", "Anna", "Berg")
    assert not user.has_usable_password() and not user.is_staff and not user.is_superuser
    assert slugs(user.led_use_cases) == {"kundenservice"}
    assert slugs(user.expert_use_cases) == {"vertrieb"}
    assert user.oidc_identity.issuer == oidc_provider.url
    # Logged in, for as long as an SSO session lasts.
    assert client.get("/").status_code in (200, 302)
    assert client.get("/use-cases/kundenservice/").status_code == 200
    assert client.get("/use-cases/technik/").status_code == 404
    assert client.session.get_expiry_age() == 8 * 3600


def test_changed_groups_change_the_roles_at_the_next_login(oidc_provider, use_cases):
    oidc_provider.user("bernd", email="bernd@example.org",
                       groups=["treue:lead:kundenservice", "treue:lead:vertrieb"])
    oidc_provider.login(Client(), "bernd")
    user = User.objects.get(oidc_identity__subject="bernd")
    assert slugs(user.led_use_cases) == {"kundenservice", "vertrieb"} and not user.is_staff

    # At the provider: one use case less, one more as an expert, and staff; a use case Treue
    # does not have is ignored.
    oidc_provider.user("bernd", email="bernd@example.org",
                       groups=["treue:lead:vertrieb", "treue:expert:technik", "treue:staff",
                               "treue:lead:gibt-es-nicht"])
    client = Client()
    assert oidc_provider.login(client, "bernd").status_code == 302
    user.refresh_from_db()
    assert slugs(user.led_use_cases) == {"vertrieb"}
    assert slugs(user.expert_use_cases) == {"technik"}
    assert user.is_staff and not user.is_superuser
    assert client.get("/admin/").status_code == 200
    assert User.objects.filter(oidc_identity__subject="bernd").count() == 1

    # Every Treue group taken away: the roles go, and the login is refused.
    oidc_provider.user("bernd", email="bernd@example.org", groups=["other"])
    client = Client()
    refused = oidc_provider.login(client, "bernd")
    assert refused.status_code == 302 and refused["Location"] == "/login/"
    page = client.get("/login/")
    assert any("keine Rolle" in m for m in messages_of(page))
    user.refresh_from_db()
    assert not user.is_staff and not slugs(user.led_use_cases)
    assert not slugs(user.expert_use_cases)
    assert "_auth_user_id" not in client.session


def test_no_treue_group_makes_no_user(oidc_provider, use_cases):
    oidc_provider.user("carla", email="carla@example.org", groups=["everyone"])
    client = Client()
    assert oidc_provider.login(client, "carla")["Location"] == "/login/"
    assert not User.objects.exists()
    assert not OidcIdentity.objects.exists()


def test_a_local_account_with_the_same_address_or_name_is_not_taken_over(
    oidc_provider, use_cases
):
    admin = User.objects.create_superuser("dora", "dora@example.org", "a-long-password-1")
    oidc_provider.user("dora-idp", email="dora@example.org", preferred_username="dora",
                       groups=["treue:expert:vertrieb"])
    client = Client()
    oidc_provider.login(client, "dora-idp")
    sso_user = User.objects.get(oidc_identity__subject="dora-idp")
    assert sso_user.pk != admin.pk and sso_user.username == "dora-2"
    assert int(client.session["_auth_user_id"]) == sso_user.pk
    admin.refresh_from_db()
    assert admin.is_superuser and not slugs(admin.expert_use_cases)


def test_local_logins_keep_working_and_sso_users_have_no_password(oidc_provider, use_cases):
    User.objects.create_user("erik", password="a-long-password-1")
    client = Client()
    page = client.get("/login/")
    assert b'id="sso-login"' in page.content and b"/oidc/authenticate/" in page.content
    ok = client.post("/login/", {"username": "erik", "password": "a-long-password-1"})
    assert ok.status_code == 302 and "_auth_user_id" in client.session

    oidc_provider.user("frida", preferred_username="frida", groups=["treue:staff"])
    oidc_provider.login(Client(), "frida")
    frida = User.objects.get(username="frida")
    assert frida.oidc_identity.subject == "frida"
    for password in ("!", frida.password, "a-long-password-1"):
        other = Client()
        refused = other.post("/login/", {"username": "frida", "password": password})
        assert refused.status_code == 200 and "_auth_user_id" not in other.session


def test_a_replayed_or_forged_callback_logs_nobody_in(oidc_provider, use_cases):
    oidc_provider.user("gert", groups=["treue:staff"])
    client = Client()
    start = client.get("/oidc/authenticate/")
    back = oidc_provider.authorize(start["Location"], "gert")
    path, query = back.split("?", 1)
    params = dict(p.split("=", 1) for p in query.split("&"))
    path = path.replace("http://testserver", "")
    # A state this browser never started: refused with a 400, not a server error.
    assert client.get(path, {**params, "state": "not-mine"}).status_code == 400
    assert client.get(path, params).status_code == 302  # the real one
    assert "_auth_user_id" in client.session
    # The same code and state again, in another browser: its session has no such state.
    other = Client()
    assert other.get(path, params)["Location"] == "/login/"
    assert "_auth_user_id" not in other.session


def test_the_provider_unreachable_fails_the_login_with_a_message(oidc_provider, settings,
                                                                 use_cases):
    oidc_provider.user("hanna", groups=["treue:staff"])
    client = Client()
    start = client.get("/oidc/authenticate/")
    back = oidc_provider.authorize(start["Location"], "hanna")
    settings.OIDC_OP_TOKEN_ENDPOINT = "http://127.0.0.1:9/token"  # nothing listens
    response = client.get(back.replace("http://testserver", ""))
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert any("fehlgeschlagen" in m for m in messages_of(client.get("/login/")))
    assert not User.objects.exists()


def test_a_token_for_another_audience_or_issuer_is_refused(oidc_provider, settings, use_cases):
    oidc_provider.user("ines", groups=["treue:staff"])
    for name, value in (("TREUE_OIDC_ISSUER", "https://someone-else.example"),
                        ("OIDC_RP_CLIENT_ID", "another-client")):
        client = Client()
        start = client.get("/oidc/authenticate/")
        back = oidc_provider.authorize(start["Location"], "ines")
        original = getattr(settings, name)
        setattr(settings, name, value)  # Treue now expects another issuer or audience
        try:
            assert client.get(back.replace("http://testserver", ""))["Location"] == "/login/"
        finally:
            setattr(settings, name, original)
    assert not User.objects.exists()


def test_sso_answers_404_while_it_is_not_configured(db, settings):
    settings.TREUE_OIDC_ENABLED = False
    client = Client()
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert b"sso-login" not in client.get("/login/").content


def test_a_deactivated_user_is_refused(oidc_provider, use_cases):
    oidc_provider.user("jan", groups=["treue:lead:technik"])
    oidc_provider.login(Client(), "jan")
    User.objects.filter(username="jan").update(is_active=False)
    client = Client()
    assert oidc_provider.login(client, "jan")["Location"] == "/login/"
    assert "_auth_user_id" not in client.session


def test_refused_sso_logins_lock_neither_sso_nor_passwords(oidc_provider, settings, use_cases):
    """Login throttling counts wrong passwords per username and address; a refused single
    sign-on (no role yet) has no username and must not lock the address."""
    User.objects.create_user("karl", password="a-long-password-1")
    oidc_provider.user("lena", groups=["everyone"])
    for _ in range(settings.TREUE_LOGIN_FAILURE_LIMIT + 2):
        assert oidc_provider.login(Client(), "lena")["Location"] == "/login/"
    oidc_provider.user("lena", groups=["treue:expert:vertrieb"])
    client = Client()
    assert oidc_provider.login(client, "lena")["Location"] != "/login/"
    assert "_auth_user_id" in client.session
    password = Client()
    password.post("/login/", {"username": "karl", "password": "a-long-password-1"})
    assert "_auth_user_id" in password.session
