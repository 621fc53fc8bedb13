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
    // Week labels: about one per 90 px of the chart's width, so that they never overlap on a
    // phone (Plotly shows every category of an axis unless told how many ticks to draw).
    var xaxis = figure.layout && figure.layout.xaxis;
    if (xaxis && xaxis.type === "category" && !xaxis.nticks) {
      xaxis.nticks = Math.max(2, Math.floor((el.clientWidth || 600) / 90));
    }
    // The box is as tall as the chart (the stylesheet's min-height only holds its place).
    if (figure.layout && figure.layout.height) el.style.minHeight = figure.layout.height + "px";
    window.Plotly.newPlot(el, figure.data, figure.layout, figure.config || {});
  });
})();
