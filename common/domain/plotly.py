"""Plotly's config for every chart of the site: no logo, no cloud, its own words in the page's
language (`PLOTLY_WORDS`, translated by common/charts.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Plotly's modebar buttons a page does not offer: "Share chart..." (plotly.js 4 shows it by
# default) uploads the figure to Plotly Cloud, and the others have nothing to do on these charts.
MODEBAR_REMOVED = [
    "sendChartToCloud", "sendDataToCloud", "editInChartStudio", "downloadJson", "select2d",
    "lasso2d", "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian",
]


# The words Plotly itself draws (the modebar's tooltips, its notices while saving an image),
# by the English text plotly.js looks them up by. The caller translates them; plotly.js has no
# German of its own in the pip package, and the page loads nothing from elsewhere.
PLOTLY_WORDS = (
    "Download plot as a PNG", "Download plot", "Preparing image - this may take a few seconds",
    "Image download succeeded", "Sorry, there was a problem downloading your image!", "Zoom",
    "Pan", "Zoom in", "Zoom out", "Autoscale", "Reset axes", "Double-click to zoom back out",
)


def plotly_config(
    *, locale: str = "en", words: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Plotly's config for every chart of the site: no Plotly logo, no cloud upload (and no
    server to upload to), and Plotly's own words in the page's language (`words`: Plotly's
    English text → the page's, for the keys of PLOTLY_WORDS)."""
    return {
        "displaylogo": False, "responsive": True, "showSendToCloud": False,
        "plotlyServerURL": "", "modeBarButtonsToRemove": list(MODEBAR_REMOVED),
        "locale": locale, "locales": {locale: {"dictionary": dict(words or {})}},
    }


CONFIG = plotly_config()
