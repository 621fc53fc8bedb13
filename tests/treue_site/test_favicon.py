"""The site's icon: every page links the SVG, and /favicon.ico, which browsers ask for whatever
a page links, leads to it instead of a 404 in the console."""

import re
from typing import Any

from django.test import Client

ICON = "/static/img/favicon.svg"


def text(response: Any) -> str:
    """A static file's body (WhiteNoise streams it)."""
    return b"".join(response.streaming_content).decode()


def test_favicon_ico_redirects_for_good_to_the_svg(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == ICON


def test_the_svg_is_served(client: Client) -> None:
    response = client.get("/favicon.ico", follow=True)
    assert response.redirect_chain == [(ICON, 301)]
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    body = text(response)
    assert body.startswith("<svg")
    # In the site's accent colour, as the stylesheet names it.
    accent = re.search(r"--accent:\s*(#[0-9a-f]{6})", text(client.get("/static/css/treue.css")))
    assert accent and f'fill="{accent[1]}"' in body


def test_every_page_links_the_icon(client: Client, db: None) -> None:
    html = client.get("/login/").content.decode()
    assert f'<link rel="icon" href="{ICON}" type="image/svg+xml">' in html
