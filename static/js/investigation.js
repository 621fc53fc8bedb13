// Progress of a running investigation: polls its progress URL and reloads the page when a
// question finishes, so the report fills in without the team lead pressing reload.
(function () {
  "use strict";
  const box = document.getElementById("status");
  if (!box || box.dataset.status !== "running") return;
  const url = box.dataset.progressUrl;
  let last = JSON.parse(document.getElementById("progress-data").textContent);
  const bar = document.getElementById("progress-bar");
  const text = document.getElementById("progress-text");
  async function poll() {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (response.ok) {
        const now = await response.json();
        bar.max = now.total;
        bar.value = now.finished;
        text.textContent = now.finished + "/" + now.total;
        if (now.finished !== last.finished || now.status !== last.status) {
          window.location.reload();
          return;
        }
        last = now;
      }
    } catch (e) {
      // A failed poll is retried at the next tick; the page stays usable.
    }
    window.setTimeout(poll, 3000);
  }
  window.setTimeout(poll, 3000);
})();
