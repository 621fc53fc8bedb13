"""Browser fixtures: Debian's chromium driven by Playwright, against pytest-django's live server.

Playwright never downloads a browser here; it launches /usr/bin/chromium. One browser serves
the whole module, each test gets a fresh context (no cookies carried over).
"""

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Long enough for a slow CI machine, short enough that a hung page fails the test quickly.
TIMEOUT_MS = 5_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does)")
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        # Playwright's sync API runs an event loop in this thread, and Django refuses database
        # access from a thread with a running loop unless told that this is intended. Set only
        # while the loop runs, so that the rest of the suite keeps Django's check.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    # A German browser, like the people the tool is for; the UI language is then Treue's choice.
    context = browser.new_context(locale="de-DE", viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()
