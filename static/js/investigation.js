// Progress of a running investigation: polls its progress URL and updates the bar in place.
// When questions finish, a link offers the fresh results instead of reloading under the
// reader's eyes; when the investigation itself ends (finished or cancelled), the page reloads.
(function () {
  "use strict";
  const box = document.getElementById("status");
  if (!box || box.dataset.status !== "running") return;
  const url = box.dataset.progressUrl;
  const shown = JSON.parse(document.getElementById("progress-data").textContent);
  const bar = document.getElementById("progress-bar");
  const text = document.getElementById("progress-text");
  const fresh = document.getElementById("fresh-results");
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const now = await response.json();
        if (now.status !== shown.status) {
          window.location.reload();
          return;
        }
        bar.max = now.total;
        bar.value = now.finished;
        text.textContent = now.finished + "/" + now.total;
        fresh.hidden = now.finished === shown.finished;
      }
    } catch (e) {
      // A failed poll is retried at the next tick; the page stays usable.
    }
    window.setTimeout(poll, 3000);
  }
  window.setTimeout(poll, 3000);
})();
