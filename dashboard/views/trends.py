"""The use-case page's and the overview's charts from the weekly figures: the trend with its
changes of judge and settings, the shares below the threshold, faithfulness by similarity.
The figures themselves are drawn by dashboard/domain/charts.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import formats, translation
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

from common.charts import chart_config
from dashboard.domain import charts
from dashboard.domain.causes import Bucket
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors.figures import WeekFigures
from dashboard.selectors.segments import ChangeFigures
from monitoring.models import SettingChange
from monitoring.services import tuning


def _separators() -> str:
    return charts.SEPARATORS.get(translation.get_language() or "de", charts.SEPARATORS["de"])



def _point(week: WeekFigures, estimate: Estimate | None) -> charts.Point:
    if estimate is None:
        return charts.Point(week.label, None, None, None, 0, True)
    return charts.Point(
        week.label, estimate.value, estimate.low, estimate.high, estimate.n, estimate.too_few
    )



def _trend_point(week: WeekFigures) -> charts.Point:
    """The week's judge-scale estimate, set apart (grey) only where its light is grey: the
    interval reaches across the action line and is too wide to decide."""
    e = week.estimate
    return charts.Point(week.label, e.value, e.low, e.high, e.n, week.light == "grey")



def _pooled_point(week: WeekFigures) -> charts.Point:
    return _point(week, week.pooled)



def _expert_point(week: WeekFigures) -> charts.Point:
    x = week.expert
    if x is None or x.value is None:
        return charts.Point(week.label, None, None, None, 0, True)
    return charts.Point(week.label, x.value, x.low, x.high, x.n_reviews, x.too_few)



def _trend_labels() -> dict[str, str]:
    return {
        "value": _("Treue laut Prüfmodell"),
        "band": _("95-%-Intervall"),
        "too_few": _("unentschieden"),
        "unknown": _("keine Schätzung"),
        "unknown_why": _("keine Schätzung: eine Schicht ohne geprüfte Antwort"),
        "threshold": _("Handlungsschwelle"),
        "y": _("Treue"),
    }



def _judge_changes(
    weeks: list[WeekFigures], settings_changed: dict[str, list[SettingChange]] | None = None,
    team_changes: Sequence[ChangeFigures] = (),
) -> list[tuple[str, str, str]]:
    """The weeks the chart marks: a judge model or prompt version changed, a setting changed,
    a new generator model or prompt version carries most answers (`team_changes`). Each with a
    short label for above its line and the details for its hover."""
    settings_changed = settings_changed or {}
    ours: dict[str, list[ChangeFigures]] = {}
    for change in team_changes:
        ours.setdefault(change.week.label, []).append(change)
    out = []
    for w in weeks:
        if w.label in ours:
            found = ours[w.label]
            label = (_("Generator-Modell gewechselt")
                     if any(c.change.dimension == "model" for c in found)
                     else _("Prompt-Version gewechselt"))
            out.append((w.label, label, "; ".join(_team_change_text(c) for c in found)))
            continue
        judges = [_("Prüfer: %(judges)s") % {
            "judges": ", ".join(
                f"{model} {version} ({mode})" for model, version, mode in w.judge_labels
            )
        }] if w.judge_changed else []
        settings = [setting_change_text(c) for c in settings_changed.get(w.label, [])]
        if judges and settings:
            label = _("Prüfer und Einstellung geändert")
        elif judges:
            label = _("Prüfer gewechselt")
        elif settings:
            label = _("Einstellung geändert")
        else:
            continue
        out.append((w.label, label, "; ".join(judges + settings)))
    return out



def _team_change_text(change: ChangeFigures) -> str:
    c = change.change
    name = _("Generator-Modell") if c.dimension == "model" else _("Prompt-Version")
    before, after = change.before.value, change.after.value
    figures = ""
    if before is not None and after is not None:
        figures = ": " + _("Treue %(then)s → %(now)s") % {
            "then": formats.number_format(round(before, 2), 2),
            "now": formats.number_format(round(after, 2), 2)}
    return f"{name} {c.before or '–'} → {c.after}{figures}"


def setting_change_text(change: SettingChange) -> str:
    """ "Stichprobenrate 3 % → 5 %", in the page's number format; both sides with the same
    decimals ("0,85 → 0,80", not "0,85 → 0,8", which reads as a number cut off)."""
    old, new = change.old_value, change.new_value
    digits = max(_decimals(change.field, old), _decimals(change.field, new))
    return (f"{change.get_field_display()} {setting_value(change.field, old, digits)} → "
            f"{setting_value(change.field, new, digits)}")


def _shown(field: str, value: float) -> float:
    return round(value * 100, 2) if field == SettingChange.Field.SAMPLE_RATE else round(value, 4)


def _decimals(field: str, value: float) -> int:
    """How many decimals ``value`` needs as the pages write it (25 → 0, 0,45 → 2)."""
    text = f"{_shown(field, value):g}"
    return len(text.partition(".")[2]) if "e" not in text else 4


def setting_value(field: str, value: float, digits: int | None = None) -> str:
    """A setting as the pages write it: the sample rate in percent, thresholds as they are, a
    switch (recorded as 1 or 0) as on or off; with ``digits`` decimals, else as few as it
    needs (25 not 25,0; 0,45 not 0,4500)."""
    if field in tuning.SWITCHES:
        return pgettext("switch", "an") if value else pgettext("switch", "aus")
    shown = _shown(field, value)
    text = f"{shown:g}" if digits is None else f"{shown:.{digits}f}"
    text = text.replace(".", formats.get_format("DECIMAL_SEPARATOR"))
    return f"{text} %" if field == SettingChange.Field.SAMPLE_RATE else text


def trend_chart(
    weeks: list[WeekFigures], threshold: float, *, compact: bool = False,
    settings_changed: dict[str, list[SettingChange]] | None = None,
    team_changes: Sequence[ChangeFigures] = (),
) -> dict[str, Any]:
    overlays = []
    if any(w.pooled_weeks > 1 for w in weeks):
        pooled = max(w.pooled_weeks for w in weeks)
        overlays.append(charts.Series(
            _("%(weeks)s Wochen, Prüfmodell") % {"weeks": pooled},
            [_pooled_point(w) for w in weeks], charts.GREY, "dot",
        ))
    if any(w.expert is not None and w.expert.value is not None for w in weeks):
        overlays.append(charts.Series(
            _("Skala der Fachexperten"), [_expert_point(w) for w in weeks], charts.GREEN,
            "dash",
        ))
    # Everything read from the weeks first, then the figure drawn from it.
    points = [_trend_point(w) for w in weeks]
    changes = _judge_changes(weeks, settings_changed, team_changes)
    return charts.trend_figure(
        points,
        threshold=threshold,
        labels=_trend_labels(),
        changes=changes,
        separators=_separators(),
        compact=compact,
        overlays=overlays,
        config=chart_config(),
    )



def shares_chart(weeks: list[WeekFigures]) -> dict[str, Any]:
    flagged = [
        charts.Point(w.label, w.flagged_share, None, None, w.volume, False) for w in weeks
    ]
    return charts.shares_figure(
        [
            charts.Series(_("unter der Handlungsschwelle"),
                          [_point(w, w.below) for w in weeks], charts.RED),
            charts.Series(_("markiert"), flagged, charts.AMBER, "dot"),
            charts.Series(_("Enthaltungen"),
                          [_point(w, w.abstention_share) for w in weeks], charts.GREY, "dash"),
        ],
        labels={"y": _("Anteil der Antworten"), "too_few": _("zu wenige geprüft")},
        separators=_separators(),
        config=chart_config(),
    )



def similarity_label(bucket: Bucket) -> str:
    """The bucket's range in the page's number format ("0,5–0,6"; the domain writes "0.5")."""
    low, high = bucket.low, bucket.high
    if low is None:
        return _("keine Angabe") if high is None else f"< {formats.number_format(high)}"
    if high is None:
        return f"≥ {formats.number_format(low)}"
    return f"{formats.number_format(low)}–{formats.number_format(high)}"



def similarity_chart(buckets: list[Bucket], threshold: float) -> dict[str, Any]:
    return charts.buckets_figure(
        [
            charts.Bar(similarity_label(b), b.estimate.value, b.estimate.low, b.estimate.high,
                       b.estimate.n, b.estimate.too_few)
            for b in buckets if b.estimate.population  # the buckets the table lists
        ],
        threshold=threshold,
        labels={
            "value": _("Treue (Schätzung)"), "threshold": _("Handlungsschwelle"),
            "x": _("beste Ähnlichkeit"), "y": _("Treue"),
        },
        separators=_separators(),
        config=chart_config(),
    )
