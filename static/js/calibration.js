// Draws the calibration page's figures from their json_script data; a click on a point of
// the scatter opens that answer (its URL is the point's customdata[1]).
(function () {
  "use strict";
  document.querySelectorAll(".chart[data-figure]").forEach(function (el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    var layout = figure.layout || {};
    var width = el.clientWidth || 600;
    // A square plot (the scatter) as wide as the card on a phone: its height follows the
    // width (plus the legend above and the axis' labels below), not the desktop's 460 px,
    // which left a small square in a tall box.
    if (layout.yaxis && layout.yaxis.scaleanchor === "x" && layout.height) {
      layout.height = Math.min(layout.height, Math.max(300, width + 90));
    }
    // Week labels: about one per 90 px of the chart's width, so that they never overlap on a
    // phone (as static/js/charts.js does for the dashboard).
    if (layout.xaxis && layout.xaxis.type === "category" && !layout.xaxis.nticks) {
      layout.xaxis.nticks = Math.max(2, Math.floor(width / 90));
    }
    if (layout.height) el.style.minHeight = layout.height + "px";
    // The config comes with the figure (review/domain/charts.py): no cloud upload, no logo,
    // Plotly's own words in the page's language.
    window.Plotly.newPlot(el, figure.data, layout, figure.config || {});
    if (el.dataset.click === "url") {
      el.on("plotly_click", function (event) {
        var point = event.points && event.points[0];
        if (point && point.customdata && point.customdata[1]) {
          window.location.href = point.customdata[1];
        }
      });
    }
  });
})();
