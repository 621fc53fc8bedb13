"""The team lead's pages: the overview of the use cases they lead (their landing page) and one
use case's page with trends, causes, the trigger's worth and the threshold tuner.

The selectors (dashboard.selectors) return the figures, dashboard.domain.charts turns
series into Plotly figures; this module picks the series, words the readings and renders.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import formats
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from common.http import AuthenticatedRequest
from dashboard.domain.charts import chart_legend
from dashboard.domain.headline import JUDGE, POOLED
from dashboard.domain.statistics import precision as statistics
from dashboard.domain.statistics.cells import Estimate
from dashboard.forms import SegmentKeysForm, TuningForm
from dashboard.selectors import blind
from dashboard.selectors import diagnosis as dashboard_diagnosis
from dashboard.selectors import overview as dashboard_overview
from dashboard.selectors import page as dashboard_page
from dashboard.selectors import segments as segment_selectors
from dashboard.selectors import weeks as dashboard_weeks
from dashboard.selectors.figures import WeekFigures, use_case_headline
from dashboard.selectors.overview import overview_order
from dashboard.views import segments as segment_views
from dashboard.views.answers import answer_list
from dashboard.views.readings import (
    chunks_reading,
    multi_part_reading,
    no_passing_reading,
    precision_reading,
    similarity_reading,
    worth_reading,
)
from dashboard.views.trends import (
    setting_change_text,
    setting_value,
    shares_chart,
    similarity_chart,
    similarity_label,
    trend_chart,
)
from monitoring.domain.segments import SegmentError, parse_dimension, parse_segments
from monitoring.models import SettingChange, UseCase
from monitoring.selectors.access import use_case_get_for_user
from monitoring.services import tuning
from monitoring.services.use_cases import use_case_declare_segment_keys


@login_required
@require_GET
def home(request: AuthenticatedRequest) -> HttpResponse:
    """Team leads and staff land on the overview, domain experts on their review queue, everyone
    else on the answer list.

    The list is served here directly rather than redirected to: "/" was its address, so old
    links and bookmarks (with their filters) keep working without a hop; "/" with filters
    stays the list for everyone.
    """
    if dashboard_overview.user_leads(user=request.user):
        return redirect("monitoring:overview")
    if not request.GET and dashboard_overview.user_reviews(user=request.user):
        return redirect("review:queue")
    return answer_list(request)


# --- readings in words ---------------------------------------------------------------------------


# --- the weekly table -----------------------------------------------------------------------------
# Its 26 rows hold ~400 numbers. Through the template's partials and floatformat (~40 µs a
# number) the table took 35 ms of a 60 ms page render; formatted here it takes a few. The markup
# is that of _dash_estimate.html and _dash_percent.html, the rounding that of floatformat.


class _Numbers:
    """floatformat's rounding (half up on the shortest repr) with the page's separators."""

    def __init__(self) -> None:
        self.decimal = str(formats.get_format("DECIMAL_SEPARATOR"))
        self.thousands = str(formats.get_format("THOUSAND_SEPARATOR"))

    def __call__(self, value: float | Decimal, digits: int, *, grouped: bool = False) -> str:
        exact = value if isinstance(value, Decimal) else Decimal(repr(value))
        rounded = exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
        text = f"{rounded:,f}" if grouped else f"{rounded:f}"
        return text.replace(",", "\x00").replace(".", self.decimal).replace("\x00", self.thousands)

    def grouped(self, value: int) -> str:
        return f"{value:,}".replace(",", self.thousands)


def _estimate_cell(e: Estimate | None, num: _Numbers, *, scale: float = 1, digits: int = 2,
                   unit: str = "", with_n: bool = True, threshold: float | None = None) -> str:
    if e is None:
        return mark_safe('<span class="muted">–</span>')  # a constant
    if e.value is None and not e.population:
        return format_html('<span class="too-few">{}</span>', _("keine Antworten"))
    if e.value is None or e.low is None or e.high is None:
        return format_html('<span class="too-few">{} <span class="n">(n = {})</span></span>',
                           _("keine Schätzung"), e.n)
    # Every estimate is shown with its interval, however wide: the width says how precise.
    # A score beside its action line is never printed on it (`shown_digits`).
    value = num(e.value * scale, statistics.shown_digits(e.value, threshold, digits))
    low, high = num(e.low * scale, digits), num(e.high * scale, digits)
    css = "estimate imprecise" if e.too_few else "estimate"
    if not with_n:
        return format_html(
            '<span class="{}">{}{} <span class="interval">({}–{})</span></span>',
            css, value, unit, low, high,
        )
    # An interval that ends at its estimate above says why (as _dash_estimate.html does).
    tops = statistics.tops_at_estimate(e)
    note = format_html(' title="{}"', _(
        "Jede zufällig gezogene Antwort erhielt 1,0: die obere Grenze ist der Schätzwert selbst."
    )) if tops else ""
    # The visible mark that the page's footnote explains (touch screens show no title).
    mark = mark_safe(_TOPS_AT_MARK) if tops else ""  # a constant
    return format_html(
        '<span class="{}"><strong class="estimate-value">{}</strong> '
        '<span class="interval"{}>({}–{})</span>{} <span class="n">n = {}</span></span>',
        css, value, note, low, high, mark, e.n,
    )


_TOPS_AT_MARK = '<sup class="tops-at-mark" aria-hidden="true">*</sup>'


def _tops_at_any(*figures: Any) -> bool:
    """Whether any of ``figures`` (estimates, headlines, None) has an interval that ends at
    its value above: the card or page then explains the mark once."""
    return any(statistics.tops_at(getattr(f, "value", None), getattr(f, "low", None),
                                  getattr(f, "high", None)) for f in figures)


def _expert_cell(week: WeekFigures, num: _Numbers, threshold: float | None = None) -> str:
    x = week.expert
    if x is None or x.value is None or x.low is None or x.high is None:
        return mark_safe('<span class="muted">–</span>')
    return format_html(
        '<span class="{}"><strong class="estimate-value">{}</strong> '
        '<span class="interval">({}–{})</span> <span class="n">{}</span></span>',
        "estimate expert-scale imprecise" if x.too_few else "estimate expert-scale",
        num(x.value, statistics.shown_digits(x.value, threshold)), num(x.low, 2), num(x.high, 2),
        _("%(n)s Prüfungen") % {"n": x.n_reviews},
    )


def _table_row(week: WeekFigures, num: _Numbers, threshold: float | None = None) -> dict[str, Any]:
    def share(e: Estimate | None) -> str:
        return _estimate_cell(e, num, scale=100, digits=1, unit=" %", with_n=False)

    return {
        "week": week,
        "volume": num.grouped(week.volume),
        "flagged": "–" if week.flagged_percent is None else f"{num(week.flagged_percent, 1)} %",
        "estimate": _estimate_cell(week.estimate, num, threshold=threshold),
        "pooled": _estimate_cell(week.pooled, num, threshold=threshold),
        "expert": _expert_cell(week, num, threshold),
        "below": share(week.below),
        "abstention": share(week.abstention_share),
        "claims": _estimate_cell(week.claims, num),
        "calls": num.grouped(week.calls),
    }


# --- pages ---------------------------------------------------------------------------------------


@login_required
@require_GET
def overview(request: AuthenticatedRequest) -> HttpResponse:
    pooled_weeks = _pooled_weeks(request)
    if isinstance(pooled_weeks, HttpResponse):
        return pooled_weeks
    # Sorted again after blind review greyed a light: the order must not tell it.
    open_in = blind.use_cases_with_open_items(user=request.user)
    rows = sorted((
        blind.figures_for_reader(
            row, user=request.user, use_case_id=row.use_case.pk, open_in=open_in
        )
        for row in dashboard_overview.overview_rows(user=request.user, pooled_weeks=pooled_weeks)
    ), key=overview_order)
    for i, row in enumerate(rows):
        # What the template shows beside the row's figures: its chart and precision sentence.
        row.chart_id = f"overview-chart-{i}"  # type: ignore[attr-defined]  # for the template
        row.data_id = f"overview-figure-{i}"  # type: ignore[attr-defined]  # for the template
        figure = trend_chart(row.weeks, row.use_case.action_threshold, compact=True)
        row.figure = figure  # type: ignore[attr-defined]  # for the template
        # The small chart has no room for Plotly's legend: one in words beside it, naming
        # every line style it draws.
        row.legend = chart_legend(  # type: ignore[attr-defined]  # for the template
            figure, change_label=_("Prüfer oder Einstellung geändert")
        )
        row.precision = (  # type: ignore[attr-defined]  # for the template
            precision_reading(row.this_week) or precision_reading(row.last_week)
        )
        row.tops_at = _tops_at_any(  # type: ignore[attr-defined]  # for the template
            row.headline, row.this_week.estimate, row.last_week.estimate,
            row.this_week.pooled, row.last_week.pooled,
        )
    return render(request, "monitoring/overview.html", {
        "rows": rows,
        "weeks": dashboard_weeks.OVERVIEW_WEEKS,
        "leads_any": bool(rows),
        "pooled_weeks": pooled_weeks,
        "pooled_choices": dashboard_weeks.POOLED_CHOICES,
        # The view the lights read (the action alarm's); another view shows no light of its own.
        "standard_pooled_weeks": dashboard_weeks.POOLED_WEEKS,
    })


def _pooled_weeks(request: AuthenticatedRequest) -> int | HttpResponse:
    """The pooled view's weeks asked for (?pooled=1, 4 or 13; default 4), or the 400 to send."""
    try:
        pooled_weeks = int(request.GET.get("pooled", dashboard_weeks.POOLED_WEEKS))
    except ValueError:
        pooled_weeks = 0
    if pooled_weeks not in dashboard_weeks.POOLED_CHOICES:
        return HttpResponseBadRequest(
            _("pooled: erlaubt sind %(choices)s Wochen.") % {
                "choices": ", ".join(map(str, dashboard_weeks.POOLED_CHOICES))},
            content_type="text/plain; charset=utf-8",
        )
    return pooled_weeks


def _calibration_url(slug: str) -> str | None:
    # The calibration page belongs to the review app, which may not be installed everywhere.
    try:
        return reverse("review:calibration", args=[slug])
    except NoReverseMatch:
        return None


@login_required
@require_GET
def use_case(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    use_case = use_case_get_for_user(user=request.user, slug=slug)
    if use_case is None:
        raise Http404
    pooled_weeks = _pooled_weeks(request)
    if isinstance(pooled_weeks, HttpResponse):
        return pooled_weeks
    return _use_case_page(request, use_case, pooled_weeks)


def _dimension(request: AuthenticatedRequest, use_case: UseCase) -> str | HttpResponse:
    """The segments' dimension asked for (?dimension=; default the generator model), or the
    400 that names the allowed ones."""
    try:
        return parse_dimension(request.GET.get("dimension", "model"), use_case.segment_keys)
    except SegmentError as e:
        return HttpResponseBadRequest(
            _("dimension: erlaubt sind %(allowed)s.") % {"allowed": ", ".join(e.allowed)},
            content_type="text/plain; charset=utf-8",
        )


def _use_case_page(
    request: AuthenticatedRequest, use_case: UseCase, pooled_weeks: int,
    tuning_form: TuningForm | None = None, status: int = 200,
    keys_form: SegmentKeysForm | None = None,
) -> HttpResponse:
    dimension = _dimension(request, use_case)
    if isinstance(dimension, HttpResponse):
        return dimension
    try:
        chosen = parse_segments(request.GET.getlist("segment"), use_case.segment_keys)
    except SegmentError as e:
        return HttpResponseBadRequest(f"segment: {e.message}",
                                      content_type="text/plain; charset=utf-8")
    segment = segment_selectors.segment_filter(chosen) if chosen else None
    page = blind.figures_for_reader(
        dashboard_page.use_case_page(use_case=use_case, pooled_weeks=pooled_weeks,
                                     segment=segment),
        user=request.user, use_case_id=use_case.pk,
    )
    # Segments only for those who lead the use case: an expert's blind answer would show its
    # score through the estimate of a segment of a few answers.
    segments = segment_selectors.segments_view(
        use_case=use_case, weeks=[w.week for w in page.weeks], dimension=dimension,
        shown=dashboard_overview.user_may_tune(user=request.user, use_case=use_case))
    threshold = use_case.action_threshold
    headline = use_case_headline(page.weeks)
    diagnosis = page.diagnosis
    causes = diagnosis.causes
    weeks = page.weeks
    settings_changed = dashboard_overview.setting_changes_by_week(
        use_case=use_case, weeks=[w.week for w in weeks])
    # The tuner reads the last weeks of the diagnosis: a change within them is said beside it.
    tuner_weeks = {w.week.label for w in weeks[-diagnosis.weeks:]}
    may_tune = dashboard_overview.user_may_tune(user=request.user, use_case=use_case)
    if tuning_form is None and may_tune:
        tuning_form = TuningForm(initial={
            "logprob_threshold": use_case.logprob_threshold,
            "sample_percent": round(use_case.sample_rate * 100, 4),
            "action_threshold": use_case.action_threshold,
        })
    if keys_form is None and may_tune:
        keys_form = SegmentKeysForm(initial={"segment_keys": ", ".join(use_case.segment_keys)})
    return render(request, "monitoring/use_case.html", {
        "may_tune": may_tune,
        "keys_form": keys_form,
        "current_settings": [
            (name, label, setting_value(name, getattr(use_case, name)))
            for name, label in SettingChange.Field.choices
        ],
        "tuning_form": tuning_form,
        "setting_changes": [
            (c, setting_change_text(c))
            for c in dashboard_overview.setting_changes(use_case=use_case,
                                                                         limit=10)],
        # The judge's evidence does not change what the tuner reads (flags and the sample).
        "tuner_changes": [
            (label, setting_change_text(c))
            for label, changes in sorted(settings_changed.items()) if label in tuner_weeks
            for c in changes if c.field not in tuning.SWITCHES
        ],
        "use_case": use_case,
        "page": page,
        "weeks": weeks,
        "weeks_newest_first": list(reversed(weeks)),
        "this_week": weeks[-1],
        "last_week": weeks[-2],
        "trend": statistics.trend(weeks[-1].estimate, weeks[-2].estimate),
        "pooled_weeks": pooled_weeks,
        "pooled_choices": dashboard_weeks.POOLED_CHOICES,
        # The view the lights read (the action alarm's); another view shows no light of its own.
        "standard_pooled_weeks": dashboard_weeks.POOLED_WEEKS,
        # The one figure the use case is judged by (as on the overview and in the alarms).
        "headline": headline,
        # Where no single week can decide, the judge's pooled view is the headline.
        "pooled_leads": headline.scale == JUDGE and headline.view == POOLED,
        "precision": precision_reading(weeks[-1]) or precision_reading(weeks[-2]),
        # One footnote explains every interval on the page that ends at its estimate above.
        "tops_at": _tops_at_any(
            headline, *(e for w in weeks for e in (w.estimate, w.pooled, w.claims)),
            *(b.estimate for b in (*causes.similarity, *causes.chunks)),
            causes.single, causes.multi, *(f.estimate for f in segments.figures),
        ),
        "diagnosis": diagnosis,
        "causes": causes,
        "trend_figure": trend_chart(weeks, threshold, settings_changed=settings_changed,
                                    team_changes=segments.changes),
        "segments": segments,
        "segment_filter": [(c.text, segment_views.dimension_label(c.dimension),
                            segment_views.value_label(c.value)) for c in chosen],
        "segment_dimensions": [
            (name, segment_views.dimension_label(name)) for name in segments.dimensions],
        "segment_dimension_label": segment_views.dimension_label(segments.dimension),
        "segment_rows": segment_views.segment_rows(segments.figures, use_case.slug),
        "segment_experts": any(f.expert is not None for f in segments.figures),
        "segment_changes": [segment_views.change_reading(c) for c in segments.changes],
        "segment_finding": segment_views.finding_reading(segments),
        "shares_figure": shares_chart(weeks),
        "similarity_figure": similarity_chart(causes.similarity, threshold),
        "similarity_rows": [(similarity_label(b), b) for b in causes.similarity],
        "readings": {
            "similarity": similarity_reading(causes, threshold),
            "chunks": chunks_reading(causes, threshold),
            "multi_part": multi_part_reading(causes),
            "no_passing": no_passing_reading(causes),
            "worth": worth_reading(diagnosis),
        },
        "calibration_url": _calibration_url(use_case.slug),
        "default_similarity": dashboard_diagnosis.DEFAULT_SIMILARITY_THRESHOLD,
        "causes_weeks": dashboard_weeks.CAUSES_WEEKS,
        "table": [
            {**_table_row(w, _Numbers(), threshold), "settings_changed": [
                setting_change_text(c) for c in settings_changed.get(w.week.label, [])]}
            for w in reversed(weeks) if w.volume
        ],
        "total": {
            "calls": sum(w.calls for w in weeks),
            "cost": sum((w.cost for w in weeks), start=Decimal(0)),
            "unpriced_runs": sum(w.unpriced_runs for w in weeks),
        },
    }, status=status)


@login_required
@require_POST
def use_case_tune(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """A team lead changes the thresholds or the sample rate (the settings form, or a tuner
    row's "use this threshold"); each change is recorded. A bad value re-renders the page with
    the form's errors (400); someone who may see but not tune the use case gets 403."""
    use_case = use_case_get_for_user(user=request.user, slug=slug)
    if use_case is None:
        raise Http404
    if not dashboard_overview.user_may_tune(user=request.user, use_case=use_case):
        raise PermissionDenied
    form = TuningForm(request.POST)
    if form.is_valid():
        try:
            changes = tuning.use_case_tune(
                use_case=use_case, user=request.user, values=form.values(),
                note=form.cleaned_data["note"],
                source=form.cleaned_data["source"] or SettingChange.Source.SETTINGS,
            )
        except ValidationError as error:
            for field, messages_ in error.message_dict.items():
                form.add_error("sample_percent" if field == "sample_rate" else field, messages_)
        else:
            if changes:
                messages.success(request, _("Gespeichert: %(changes)s.") % {
                    "changes": "; ".join(setting_change_text(c) for c in changes)})
            else:
                messages.info(request, _("Nichts geändert: die Werte waren schon eingestellt."))
            return redirect(reverse("monitoring:use_case", args=[slug]) + "#settings")
    form.mark_first_error()
    return _use_case_page(
        request, use_case, dashboard_weeks.POOLED_WEEKS, tuning_form=form, status=400)


@login_required
@require_POST
def use_case_segment_keys(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """A team lead declares the metadata keys whose values become segments (issue 40). A bad
    list re-renders the page with the form's error (400)."""
    use_case = use_case_get_for_user(user=request.user, slug=slug)
    if use_case is None:
        raise Http404
    if not dashboard_overview.user_may_tune(user=request.user, use_case=use_case):
        raise PermissionDenied
    form = SegmentKeysForm(request.POST)
    if form.is_valid():
        keys = use_case_declare_segment_keys(use_case=use_case,
                                             keys=form.cleaned_data["segment_keys"])
        messages.success(request, _("Segment-Schlüssel gespeichert: %(keys)s.") % {
            "keys": ", ".join(keys) or _("keine")})
        return redirect(reverse("monitoring:use_case", args=[slug]) + "#segments")
    return _use_case_page(request, use_case, dashboard_weeks.POOLED_WEEKS, keys_form=form,
                          status=400)
