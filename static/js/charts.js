// Draws the dashboard's Plotly figures. Each chart is an element with data-dash-figure naming
// the <script type="application/json"> that json_script wrote with the figure in it; no inline
// script anywhere, so a Content-Security-Policy without 'unsafe-inline' holds.
(function () {
  "use strict";
  if (!window.Plotly) return;
  document.querySelectorAll("[data-dash-figure]").forEach(function (el) {
    var source = document.getElementById(el.dataset.dashFigure);
    if (!source) return;
    var figure = JSON.parse(source.textContent);
    window.Plotly.newPlot(el, figure.data, figure.layout, figure.config || {});
  });
})();
