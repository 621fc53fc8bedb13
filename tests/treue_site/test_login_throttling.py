"""Login throttling (django-axes) on the site's login and the admin's: a username is locked from
one address after too many wrong passwords, with a German page (429) saying for how long and
whom to ask; other people and other addresses are not; the lock ends after the cool-off or when
an admin lifts it (admin or `axes_reset_username`). Limits come from TREUE_LOGIN_* variables.
"""

from datetime import timedelta
from typing import Any, Unpack

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.support.http import Environ
from tests.treue_site.test_deploy_check import production_env, run, setting

PASSWORD = "pw-for-throttling-tests-3a9"
WRONG = "not-the-password"
ATTACKER = "203.0.113.7"
ELSEWHERE = "198.51.100.20"

# The site's login sends the person on to the overview; the admin's to the admin.
LOGINS = {"site": ("/login/", "/"), "admin": ("/admin/login/?next=/admin/", "/admin/")}


@pytest.fixture
def people(db: None, settings: Any) -> dict[str, User]:
    return {
        "anna": User.objects.create_user("anna", password=PASSWORD, is_staff=True),
        "ben": User.objects.create_user("ben", password=PASSWORD, is_staff=True),
        "admin": User.objects.create_superuser("chefin", password=PASSWORD),
    }


def attempt(
    client: Client, which: str, username: str, password: str, address: str = ATTACKER,
    **headers: Unpack[Environ],
) -> Any:
    url, _ = LOGINS[which]
    return client.post(
        url, {"username": username, "password": password}, REMOTE_ADDR=address, **headers
    )


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail(client: Client, which: str, username: str, times: int, address: str = ATTACKER) -> None:
    for _ in range(times):
        response = attempt(client, which, username, WRONG, address)
        assert response.status_code in (200, 429)  # the form with its error, or the lockout
    assert not logged_in(client)


def assert_lockout_page(response: Any, minutes: int) -> None:
    assert response.status_code == 429
    assert (minutes - 1) * 60 < int(response["Retry-After"]) <= minutes * 60
    html = response.content.decode()
    assert '<html lang="de">' in html
    assert "Anmeldung vorübergehend gesperrt" in html
    assert f"{minutes} Minuten" in html
    assert "Administrator" in html
    assert 'class="card narrow"' in html  # the login page's look, not a bare text


# --- the defaults --------------------------------------------------------------------------------


def test_the_defaults_are_five_failures_per_username_and_address_and_fifteen_minutes(
    settings: Any,
) -> None:
    assert settings.AXES_FAILURE_LIMIT == 5
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=15)
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]
    assert "axes.middleware.AxesMiddleware" in settings.MIDDLEWARE
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"


# --- both login pages ----------------------------------------------------------------------------


@pytest.mark.parametrize("which", LOGINS)
def test_the_right_password_after_too_many_wrong_ones_is_refused(
    people: dict[str, User], which: str, settings: Any
) -> None:
    client = Client()
    fail(client, which, "anna", 40)
    response = attempt(client, which, "anna", PASSWORD)
    assert_lockout_page(response, 15)
    assert not logged_in(client)
    assert client.get("/admin/").status_code == 302  # still sent to a login


@pytest.mark.parametrize("which", LOGINS)
def test_one_failure_below_the_limit_still_lets_the_right_password_in(
    people: dict[str, User], which: str, settings: Any
) -> None:
    client = Client()
    fail(client, which, "anna", settings.AXES_FAILURE_LIMIT - 1)
    response = attempt(client, which, "anna", PASSWORD)
    assert response.status_code == 302
    assert response["Location"] == LOGINS[which][1]
    assert logged_in(client)


def test_the_limit_is_reached_exactly_at_the_configured_number(
    people: dict[str, User], settings: Any
) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    client = Client()
    assert attempt(client, "site", "anna", WRONG).status_code == 200
    assert attempt(client, "site", "anna", WRONG).status_code == 429
    assert attempt(client, "site", "anna", PASSWORD).status_code == 429


def test_a_success_starts_the_count_afresh(people: dict[str, User], settings: Any) -> None:
    client = Client()
    fail(client, "site", "anna", settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(client, "site", "anna", PASSWORD).status_code == 302
    client.post("/logout/")
    fail(Client(), "site", "anna", settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(Client(), "site", "anna", PASSWORD).status_code == 302


def test_the_lockout_page_speaks_english_when_asked(people: dict[str, User]) -> None:
    client = Client()
    client.cookies["django_language"] = "en"
    fail(client, "site", "anna", 5)
    response = attempt(client, "site", "anna", PASSWORD)
    assert response.status_code == 429
    html = response.content.decode()
    assert '<html lang="en">' in html
    assert "Login temporarily locked" in html and "15 minutes" in html
    assert "gesperrt" not in html


def test_a_locked_person_trying_again_does_not_extend_the_lock(
    people: dict[str, User],
) -> None:
    # The page names a time; trying again meanwhile must not push it back, or it would lie.
    client = Client()
    fail(client, "site", "anna", 5)
    before = AccessAttempt.objects.get(username="anna").attempt_time
    fail(client, "site", "anna", 3)
    assert attempt(client, "site", "anna", PASSWORD).status_code == 429
    assert AccessAttempt.objects.get(username="anna").attempt_time == before


# --- who is locked: one username from one address ------------------------------------------------


def test_others_and_the_same_person_elsewhere_are_not_locked(people: dict[str, User]) -> None:
    fail(Client(), "site", "anna", 40)
    # Another person from another address.
    other = Client()
    assert attempt(other, "site", "ben", PASSWORD, ELSEWHERE).status_code == 302
    assert logged_in(other)
    # The attacker cannot lock Anna out: from her own address she logs in.
    anna = Client()
    assert attempt(anna, "admin", "anna", PASSWORD, ELSEWHERE).status_code == 302
    assert logged_in(anna)
    # A colleague behind the attacker's address is not locked either (no spraying lockout).
    colleague = Client()
    assert attempt(colleague, "site", "ben", PASSWORD, ATTACKER).status_code == 302


def test_a_forwarded_for_header_does_not_dodge_the_lock(people: dict[str, User]) -> None:
    # Unless TREUE_CLIENT_IP_HEADER names it, a header the client sends is not its address.
    client = Client()
    for n in range(5):
        attempt(client, "site", "anna", WRONG, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")
    response = attempt(client, "site", "anna", PASSWORD, HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert response.status_code == 429


def test_behind_a_proxy_the_address_it_names_is_the_clients(
    people: dict[str, User], settings: Any
) -> None:
    settings.TREUE_CLIENT_IP_HEADER = "HTTP_X_FORWARDED_FOR"
    proxy = "10.0.0.1"
    # The proxy appends the address it saw; what the client wrote before it counts for nothing.
    for n in range(5):
        attempt(Client(), "site", "anna", WRONG, proxy,
                HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, {ATTACKER}")
    locked = attempt(Client(), "site", "anna", PASSWORD, proxy, HTTP_X_FORWARDED_FOR=ATTACKER)
    assert locked.status_code == 429
    assert AccessAttempt.objects.get().ip_address == ATTACKER
    fine = attempt(Client(), "site", "anna", PASSWORD, proxy, HTTP_X_FORWARDED_FOR=ELSEWHERE)
    assert fine.status_code == 302


def test_a_proxy_header_that_is_missing_or_no_address_falls_back_to_the_peer(
    people: dict[str, User], settings: Any
) -> None:
    settings.TREUE_CLIENT_IP_HEADER = "HTTP_X_REAL_IP"
    attempt(Client(), "site", "anna", WRONG, ATTACKER)
    attempt(Client(), "site", "anna", WRONG, ATTACKER, HTTP_X_REAL_IP="not an address")
    attempt(Client(), "site", "anna", WRONG, ATTACKER, HTTP_X_REAL_IP="")
    attempt(Client(), "site", "anna", WRONG, ATTACKER, HTTP_X_REAL_IP="[2001:db8::1]:443")
    assert list(AccessAttempt.objects.values_list("ip_address", "failures_since_start")) == [
        (ATTACKER, 4)
    ]


@pytest.mark.parametrize("agent", ["Mozilla/5.0 \x00", "x" * 2000])
def test_odd_requests_never_cost_a_500(people: dict[str, User], agent: str) -> None:
    client = Client()
    # A NUL in the password is refused by the form before any password is checked.
    assert attempt(client, "site", "anna", "\x00" + WRONG, HTTP_USER_AGENT=agent).status_code == 200
    for _ in range(6):
        response = attempt(client, "site", "anna", WRONG, HTTP_USER_AGENT=agent)
        assert response.status_code in (200, 429)
    assert attempt(client, "site", "anna", PASSWORD, HTTP_USER_AGENT=agent).status_code == 429


@pytest.mark.parametrize("which", LOGINS)
@pytest.mark.parametrize("length", [256, 10_000])
def test_an_overlong_username_is_a_failed_login_and_locks_like_any(
    people: dict[str, User], which: str, length: int
) -> None:
    # django-axes stored the username in a 255-character column: on PostgreSQL a 500.
    client = Client()
    name = "ä" * length
    assert attempt(client, which, name, WRONG).status_code == 200  # the form, with its error
    fail(client, which, name, 4)
    assert attempt(client, which, name, WRONG).status_code == 429
    # A name that shares its first 255 characters is another person: not locked.
    other = Client()
    assert attempt(other, which, name[:-1] + "b", WRONG).status_code == 200
    assert attempt(Client(), which, "anna", PASSWORD).status_code == 302


# --- the end of a lock: cool-off, the admin, the command -----------------------------------------


def test_the_lock_ends_after_the_cool_off(people: dict[str, User]) -> None:
    client = Client()
    fail(client, "site", "anna", 5)
    lock = AccessAttempt.objects.get(username="anna")
    # Ten minutes later the page says five are left.
    AccessAttempt.objects.filter(pk=lock.pk).update(
        attempt_time=lock.attempt_time - timedelta(minutes=10)
    )
    assert_lockout_page(attempt(client, "site", "anna", PASSWORD), 5)
    AccessAttempt.objects.filter(pk=lock.pk).update(
        attempt_time=lock.attempt_time - timedelta(minutes=15, seconds=1)
    )
    response = attempt(client, "site", "anna", PASSWORD)
    assert response.status_code == 302 and logged_in(client)


def test_the_cool_off_follows_the_setting(people: dict[str, User], settings: Any) -> None:
    settings.AXES_COOLOFF_TIME = timedelta(minutes=60)
    client = Client()
    fail(client, "site", "anna", 5)
    assert_lockout_page(attempt(client, "site", "anna", PASSWORD), 60)


def test_the_admin_lists_the_lock_in_german_and_lifting_it_lets_the_person_in(
    people: dict[str, User],
) -> None:
    fail(Client(), "site", "anna", 5)
    admin = Client()
    admin.force_login(people["admin"])
    index = admin.get("/admin/").content.decode()
    assert "Anmeldesperren" in index and "Zugriffsversuche" in index
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "anna" in html and ATTACKER in html
    assert "Gesperrt" in html and "Locked Out" not in html
    lock = AccessAttempt.objects.get(username="anna")
    response = admin.post(f"/admin/axes/accessattempt/{lock.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    client = Client()
    assert attempt(client, "site", "anna", PASSWORD).status_code == 302
    assert logged_in(client)


def test_the_admin_shows_remaining_attempts_in_german(people: dict[str, User]) -> None:
    fail(Client(), "site", "anna", 2)
    admin = Client()
    admin.force_login(people["admin"])
    html = admin.get("/admin/axes/accessattempt/").content.decode()
    assert "3 Versuch(e) übrig" in html


def test_the_reset_command_lets_the_person_in(people: dict[str, User]) -> None:
    fail(Client(), "admin", "anna", 5)
    assert attempt(Client(), "admin", "anna", PASSWORD).status_code == 429
    call_command("axes_reset_username", "anna")
    client = Client()
    assert attempt(client, "admin", "anna", PASSWORD).status_code == 302
    assert logged_in(client)


def test_force_login_is_untouched_by_the_lock(people: dict[str, User]) -> None:
    # The test suite logs people in with force_login: no request, no throttling.
    fail(Client(), "site", "anna", 5)
    client = Client()
    client.force_login(people["anna"])
    assert client.get("/answers/").status_code == 200


# --- configuration -------------------------------------------------------------------------------


def test_the_limits_come_from_the_environment(tmp_path: Any) -> None:
    env = production_env(tmp_path, TREUE_LOGIN_FAILURE_LIMIT="8", TREUE_LOGIN_COOLOFF_MINUTES="45")
    assert setting(env, "settings.AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME") == (
        "8 0:45:00"
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TREUE_LOGIN_FAILURE_LIMIT", "0", "TREUE_LOGIN_FAILURE_LIMIT must be at least 1"),
        ("TREUE_LOGIN_FAILURE_LIMIT", "fünf", "TREUE_LOGIN_FAILURE_LIMIT must be an integer"),
        ("TREUE_LOGIN_COOLOFF_MINUTES", "0", "TREUE_LOGIN_COOLOFF_MINUTES must be at least 1"),
        ("TREUE_CLIENT_IP_HEADER", "X-Forwarded-For", "TREUE_CLIENT_IP_HEADER must be"),
    ],
)
def test_bad_limits_refuse_to_start(
    tmp_path: Any, variable: str, value: str, message: str
) -> None:
    result = run(production_env(tmp_path, **{variable: value}), "manage.py", "check")
    assert result.returncode != 0
    assert message in result.stderr
