"""Text for a Plotly figure that Plotly shows as it is, never as markup.

Plotly renders a subset of HTML in every text it draws (titles, annotations, tick labels,
legend names, hover labels): `<a href>` becomes a link, `<span style>` restyles, `<br>` breaks
the line. And `%{...}` is an expression it fills in, not only in a hover template: annotations,
axis titles and trace names are filled from the figure's `meta` (an unknown one becomes "":
a judge model named "x %{y}" was shown as "x " on the trend chart). A model name, a week label
or any other string from outside must therefore reach a figure escaped. Plotly splits a text at
its tags first and then decodes entities in the text between them (plotly.js
svg_text_utils.convertEntities: `&amp; &lt; &gt;` and numeric entities; not `&quot;`), so the
escaped text is drawn literally.

The chart modules (dashboard.domain.charts, review.domain.charts) call this on every string
they put into a figure, so no caller has to remember it: their inputs are plain text.
"""

from __future__ import annotations

# `&` first, or the entities written for the others would be escaped again. Quotes as numeric
# entities because Plotly knows no `&quot;`; `%` so that `%{` in outside text cannot become a
# template expression (Plotly fills templates before it decodes entities).
_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;"),
            ("%", "&#37;"))


def plotly_text(value: object) -> str:
    """`value` as text that Plotly draws literally: no tag, no template expression."""
    text = str(value)
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text
