"""What a use case's page says in words: the causes (similarity, chunk count, multi-part
questions, no passage that carries the answer), whether the trigger is worth it, and what a
week's interval can decide."""

from __future__ import annotations

from django.template.defaultfilters import floatformat
from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.precision import MAX_WEEKS_TO_DECIDE, Precision
from dashboard.selectors import diagnosis as dashboard_diagnosis
from dashboard.selectors.figures import WeekFigures


def precision_reading(week: WeekFigures) -> str | None:
    """For a week too imprecise to decide (grey light): what would decide it, in numbers
    computed from the week's own volume and spread. None for a decided week."""
    p = week.precision
    if p is None or p.decisive or not week.volume:
        return None
    if p.half_width is None:
        parts = [_("Keine Schätzung für %(week)s: in einer Gruppe von Antworten ist keine geprüft.")
                 % {"week": week.label}]
    else:
        parts = [_(
            "Unentschieden (%(week)s): das Intervall (±%(half)s) reicht über die "
            "Handlungsschwelle."
        ) % {"week": week.label, "half": _num(p.half_width)}]
    target = _num(p.target_half_width)
    if p.sample_rate is not None and p.current_rate is not None:
        parts.append(_(
            "Bei diesem Volumen ergäbe eine Stichprobenrate von %(rate)s %% (in dieser Woche "
            "geprüft: %(now)s %%) ±%(target)s."
        ) % {"rate": floatformat(p.sample_rate * 100, -1),
             "now": floatformat(p.current_rate * 100, -1), "target": target})
    if p.pooled_half_width is not None and p.pooled_weeks > 1:
        parts.append(_("Die %(weeks)s-Wochen-Sicht ergibt ±%(half)s.") % {
            "weeks": p.pooled_weeks, "half": _num(p.pooled_half_width)})
    weeks = _weeks_to_decide_reading(p)
    return " ".join([*parts, weeks] if weeks else parts)


def _weeks_to_decide_reading(p: Precision) -> str | None:
    weeks = p.weeks_to_decide
    if weeks is None:
        return None
    if weeks > MAX_WEEKS_TO_DECIDE:
        return _("Bei diesem Volumen und dieser Stichprobenrate entschiede erst eine Sicht über "
                 "mehr als ein Jahr: eine höhere Stichprobenrate hilft hier mehr als Warten.")
    if p.pooled_half_width is not None and weeks <= p.pooled_weeks:
        return ngettext("Sie entscheidet schon ab etwa %(weeks)s Woche.",
                        "Sie entscheidet schon ab etwa %(weeks)s Wochen.", weeks) % {"weeks": weeks}
    return ngettext(
        "Bleiben Volumen und Treue, wie sie sind, entscheidet eine Sammelsicht über etwa "
        "%(weeks)s Woche.",
        "Bleiben Volumen und Treue, wie sie sind, entscheidet eine Sammelsicht über etwa "
        "%(weeks)s Wochen.", weeks) % {"weeks": weeks}


def _num(value: float | None, digits: int = 2) -> str:
    # floatformat, as in the templates: localized (decimal comma in German), rounded alike.
    return "–" if value is None else floatformat(value, digits)


def _percent(value: float | None) -> str:
    return "–" if value is None else floatformat(value * 100, 0)


def _usable(estimate: Estimate) -> bool:
    return not estimate.too_few and estimate.value is not None


def _holds(causes: dashboard_diagnosis.Causes, name: str, sign: int) -> bool:
    """The cause's association survives adjustment for the others and the multiplicity
    correction, in the direction `sign` (+1: higher score with more of it)."""
    effect = causes.effect(name)
    return bool(effect and effect.holds and effect.estimate is not None
                and effect.estimate * sign > 0)


def _effect_text(causes: dashboard_diagnosis.Causes, name: str, unit: str) -> str | None:
    effect = causes.effect(name)
    if effect is None or effect.estimate is None or effect.low is None or effect.high is None:
        return None
    return _(
        "Bei gleicher übriger Lage geht %(unit)s mit %(sign)s%(estimate)s Treue einher "
        "(korrigiertes 95-%%-Intervall %(low)s bis %(high)s)."
    ) % {"unit": unit, "sign": "+" if effect.estimate >= 0 else "",
         "estimate": _num(effect.estimate), "low": _num(effect.low), "high": _num(effect.high)}


def _similarity_range(index: int) -> str:
    """A similarity bucket's range as the bucket table writes it ("0,5–0,6", "< 0,5")."""
    edges = dashboard_diagnosis.SIMILARITY_EDGES
    low = edges[index - 1] if index else None
    high = edges[index] if index < len(edges) else None
    if low is None:
        assert high is not None  # an index has an edge on at least one side
        return f"< {formats.number_format(high)}"
    if high is None:
        return f"≥ {formats.number_format(low)}"
    return f"{formats.number_format(low)}–{formats.number_format(high)}"


def _similarity_effect_text(causes: dashboard_diagnosis.Causes) -> str | None:
    """Similarity enters the adjusted comparison by bucket: its effect is the highest bucket's
    answers against the lowest's, at equal chunk count and question kind."""
    effect = causes.effect("similarity")
    ends = causes.adjusted.similarity_buckets if causes.adjusted is not None else None
    if (effect is None or effect.estimate is None or effect.low is None or effect.high is None
            or ends is None):
        return None
    return _(
        "Bei gleicher Abschnittszahl und Frageart gehen Antworten mit bester Ähnlichkeit "
        "%(upper)s gegenüber solchen mit %(lower)s mit %(sign)s%(estimate)s Treue einher "
        "(korrigiertes 95-%%-Intervall %(low)s bis %(high)s)."
    ) % {"upper": _similarity_range(ends[1]), "lower": _similarity_range(ends[0]),
         "sign": "+" if effect.estimate >= 0 else "", "estimate": _num(effect.estimate),
         "low": _num(effect.low), "high": _num(effect.high)}


def similarity_reading(causes: dashboard_diagnosis.Causes, threshold: float) -> str:
    effect = _similarity_effect_text(causes)
    if causes.cutoff is not None and _usable(causes.no_passing_chunk):
        text = _joined(_(
            "Antworten mit bester Ähnlichkeit unter %(cutoff)s sind zu %(percent)s %% treu."
        ) % {"cutoff": _num(causes.cutoff), "percent": _percent(causes.no_passing_chunk.value)},
            effect)
        if _holds(causes, "similarity", +1) and causes.cutoff_held_out:
            return text + " " + _(
                "Der Zusammenhang hält, auch bereinigt um Abschnittszahl und Frageart: Als "
                "Schwelle im RAG-Dienst unter %(cutoff)s nicht das Modell fragen, sondern "
                "„Weiß ich nicht“ erlauben."
            ) % {"cutoff": _num(causes.cutoff)}
        if not _holds(causes, "similarity", +1):
            return text + " " + _(
                "Bereinigt um Abschnittszahl und Frageart ist der Zusammenhang nicht gesichert: "
                "daraus folgt noch keine Schwelle."
            )
        return text + " " + _(
            "In den übrigen Wochen bestätigt sich diese Schwelle nicht: sie könnte eine "
            "zufällige Delle sein, daraus folgt noch keine Schwelle."
        )
    usable = [b for b in causes.similarity if _usable(b.estimate)]
    if len(usable) < 2:
        return _joined(
            _("Zu wenige geprüfte Antworten je Ähnlichkeitsstufe für eine Aussage."), effect)
    if _holds(causes, "similarity", +1):  # no bucket below the line, but a slope that holds
        return _joined(_(
            "Keine Ähnlichkeitsstufe liegt sicher unter der Handlungsschwelle von %(threshold)s."
        ) % {"threshold": _num(threshold)}, effect)
    return _joined(_(
        "Keine Ähnlichkeitsstufe liegt sicher unter der Handlungsschwelle von %(threshold)s: "
        "Ein schlechter Abruf ist hier nicht als Zusammenhang erkennbar."
    ) % {"threshold": _num(threshold)}, effect)


def _joined(*sentences: str | None) -> str:
    return " ".join(s for s in sentences if s)


def chunks_reading(causes: dashboard_diagnosis.Causes, threshold: float) -> str:
    text = _effect_text(causes, "chunks", _("je 10 Abschnitte mehr"))
    if text is None:
        return _("Zu wenige geprüfte Antworten oder zu wenig Unterschied in der Abschnittszahl "
                 "für eine Aussage.")
    if _holds(causes, "chunks", -1):
        return text + " " + _(
            "Mehr Kontext ist mit weniger Treue verbunden, auch bereinigt: viele Abschnitte "
            "mischen Dokumente — ein Reranker ist einen Versuch wert."
        )
    return text + " " + _("Kein gesicherter Zusammenhang (ein Zusammenhang, keine Ursache).")


def multi_part_reading(causes: dashboard_diagnosis.Causes) -> str:
    single, multi = causes.single, causes.multi
    effect = _effect_text(causes, "multi_part", _("eine mehrteilige statt einer einfachen Frage"))
    if not (_usable(single) and _usable(multi)):
        return _("Zu wenige geprüfte mehrteilige oder einfache Fragen für einen Vergleich.")
    text = _joined(_(
        "Mehrteilige Fragen werden zu %(multi)s %% treu beantwortet, einfache zu %(single)s %%."
    ) % {"multi": _percent(multi.value), "single": _percent(single.value)}, effect)
    if _holds(causes, "multi_part", -1):
        return text + " " + _(
            "Der Unterschied hält auch bereinigt um Ähnlichkeit und Abschnittszahl (ein "
            "Zusammenhang, keine Ursache). Ein häufiger Grund, den diese Zahlen nicht belegen: "
            "zu einem Teil der Frage fehlen die Quellen, und das Modell ergänzt ihn."
        )
    return text + " " + _("Bereinigt um die übrigen Ursachen kein gesicherter Unterschied.")


def no_passing_reading(causes: dashboard_diagnosis.Causes) -> str:
    estimate = causes.no_passing_chunk
    values = {"threshold": _num(causes.similarity_threshold), "n": estimate.population}
    if not estimate.population:
        return _(
            "Keine Antwort wurde ohne einen Abschnitt mit Ähnlichkeit ab %(threshold)s gegeben."
        ) % values
    if not _usable(estimate):
        return _(
            "%(n)s Antworten wurden gegeben, obwohl kein Abschnitt die Ähnlichkeit %(threshold)s "
            "erreichte; zu wenige davon sind geprüft für eine Aussage."
        ) % values
    return _(
        "%(n)s Antworten wurden gegeben, obwohl kein Abschnitt die Ähnlichkeit %(threshold)s "
        "erreichte; sie sind zu %(percent)s %% treu."
    ) % {**values, "percent": _percent(estimate.value)}


def worth_reading(diagnosis: dashboard_diagnosis.Diagnosis) -> str:
    lift = diagnosis.worth
    if lift.lift is None or lift.too_few:
        return _("Zu wenige geprüfte Antworten, um den Nutzen der Markierung zu beziffern.")
    text = _(
        "Markierte Antworten sind %(lift)s-mal so oft untreu wie Antworten der Zufallsstichprobe "
        "(95 %%: %(low)s–%(high)s)."
    ) % {"lift": _num(lift.lift, 1), "low": _num(lift.low, 1), "high": _num(lift.high, 1)}
    if lift.low is not None and lift.low > 1:
        return text + " " + _("Die Markierung findet die untreuen Antworten.")
    return text + " " + _(
        "Das Intervall reicht bis 1: Die Markierung trennt hier nicht sicher — die Schwelle "
        "unten prüfen."
    )
