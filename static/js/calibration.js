// Draws the calibration page's figures from their json_script data; a click on a point of
// the scatter opens that answer (its URL is the point's customdata[1]).
(function () {
  "use strict";
  document.querySelectorAll(".chart[data-figure]").forEach(function (el) {
    var source = document.getElementById(el.dataset.figure);
    if (!source || !window.Plotly) return;
    var figure = JSON.parse(source.textContent);
    // The config comes with the figure (review/domain/charts.py): no cloud upload, no logo,
    // Plotly's own words in the page's language.
    window.Plotly.newPlot(el, figure.data, figure.layout, figure.config || {});
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
