"""Plotly's config for every chart of the site, in the page's language.

One place for it, as the dashboard (monitoring) and the calibration page (review) both draw
Plotly charts: no logo, no "Share chart" to Plotly Cloud, and the words Plotly draws itself
(the modebar's tooltips, its notices while saving an image) in German or English. plotly.js
brings no German of its own in the pip package; the words go through the site's catalogue and
reach the chart in its config, so nothing is loaded from elsewhere.
"""

from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _

from common.domain.plotly import plotly_config


def chart_config() -> dict[str, Any]:
    """Every key of dashboard.domain.charts.PLOTLY_WORDS, translated (a test checks)."""
    words = {
        "Download plot as a PNG": _("Diagramm als PNG herunterladen"),
        "Download plot": _("Diagramm herunterladen"),
        "Preparing image - this may take a few seconds":
            _("Das Bild wird erstellt – das kann einige Sekunden dauern"),
        "Image download succeeded": _("Bild heruntergeladen"),
        "Sorry, there was a problem downloading your image!":
            _("Das Bild konnte nicht heruntergeladen werden."),
        "Zoom": _("Ausschnitt vergrößern"),
        "Pan": _("Verschieben"),
        "Zoom in": _("Hineinzoomen"),
        "Zoom out": _("Herauszoomen"),
        "Autoscale": _("Automatisch skalieren"),
        "Reset axes": _("Achsen zurücksetzen"),
        "Double-click to zoom back out": _("Doppelklick zeigt wieder alles"),
    }
    return plotly_config(locale=translation.get_language() or "de", words=words)
