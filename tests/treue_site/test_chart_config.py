"""Plotly's config of every chart: no cloud upload, and Plotly's own words in the page's
language (issue 20: the modebar offered "Share chart..." to Plotly Cloud, in English)."""

from django.utils import translation

from common.charts import chart_config
from common.domain.plotly import PLOTLY_WORDS


def test_every_word_plotly_draws_is_translated_in_german() -> None:
    with translation.override("de"):
        config = chart_config()
    dictionary = config["locales"][config["locale"]]["dictionary"]
    assert config["locale"] == "de"
    assert set(dictionary) == set(PLOTLY_WORDS)
    assert dictionary["Download plot as a PNG"] == "Diagramm als PNG herunterladen"
    assert all(text and text != english for english, text in dictionary.items()), dictionary
    assert config["showSendToCloud"] is False and config["displaylogo"] is False
    assert config["plotlyServerURL"] == ""
    assert "sendChartToCloud" in config["modeBarButtonsToRemove"]


def test_in_english_plotly_keeps_its_words() -> None:
    with translation.override("en"):
        config = chart_config()
    assert config["locale"] == "en"
    assert config["locales"]["en"]["dictionary"]["Reset axes"] == "Reset axes"
