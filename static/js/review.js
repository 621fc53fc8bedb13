// The review page: keyboard control and saving as the expert goes.
// Keys: 1/2/3 label the focused claim (the one highlighted, or whose choices have the focus), j/k move between claims, Enter submits the answer
// (or, once submitted, opens the next one). Every change is saved at once, so a reload
// loses nothing; the form still works without this script (Speichern / Abgeben).
(function () {
  "use strict";
  var form = document.getElementById("review-form");
  var next = document.getElementById("next-answer");

  function typing(event) {
    var t = event.target;
    return t && (t.tagName === "TEXTAREA" || (t.tagName === "INPUT" && t.type === "text") ||
                 t.isContentEditable);
  }

  if (!form) {
    // Submitted: Enter goes on to the next answer.
    document.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && next && !typing(event) && !event.target.closest("form, a, button")) {
        event.preventDefault();
        window.location.href = next.href;
      }
    });
    return;
  }

  var claims = Array.prototype.slice.call(form.querySelectorAll(".review-claim"));
  var state = document.getElementById("save-state");
  var current = 0;
  var pending = null;
  var saving = Promise.resolve();

  function markCurrent(index) {
    current = Math.max(0, Math.min(claims.length - 1, index));
    claims.forEach(function (c, i) { c.classList.toggle("focused", i === current); });
  }

  function focusClaim(index) {
    if (!claims.length) return;
    markCurrent(index);
    claims[current].focus({ preventScroll: true });
    claims[current].scrollIntoView({ block: "nearest" });
  }

  // Tab (or a click) into a claim's choices makes it the claim the keys act on.
  form.addEventListener("focusin", function (event) {
    var claim = event.target.closest(".review-claim");
    if (claim) markCurrent(claims.indexOf(claim));
  });

  function show(text) { if (state) state.textContent = text; }

  var revision = document.getElementById("revision");

  var unsent = 0;    // saves waiting for the one before them to be answered
  var inFlight = 0;  // saves sent and not answered yet

  function save() {
    pending = null;
    unsent += 1;
    show(state.dataset.saving);
    saving = saving.then(function () {
      unsent -= 1;
      inFlight += 1;
      // Read when it is sent, after the save before it: with the revision that one returned.
      var data = new FormData(form);
      data.delete("new_claim");  // a new claim is added with its button, not by autosave
      return fetch(form.dataset.saveUrl, {
        method: "POST",
        body: data,
        headers: { "Accept": "application/json" },
        credentials: "same-origin",
      }).then(function (response) {
        if (response.ok) {
          return response.json().then(function (body) {
            if (revision && body.revision) revision.value = body.revision;
            show(state.dataset.saved);
          }, function () { show(state.dataset.saved); });
        }
        // The server says why (another expert holds the answer, a bad value): show its words.
        return response.json().then(function (body) {
          show((body.errors && body.errors.join(" ")) || state.dataset.failed);
        }, function () { show(state.dataset.failed); });
      }, function () { show(state.dataset.failed); }).then(function () { inFlight -= 1; });
    });
    return saving;
  }

  function saveSoon(delay) {
    clearTimeout(pending);
    pending = setTimeout(save, delay);
  }

  // A form post (Abgeben, Speichern, a claim added, removed) carries everything itself, with
  // the revision the last save returned: so it waits for a save still under way, which would
  // otherwise change the revision under it and make the post look like someone else's.
  var resubmitting = false;
  form.addEventListener("submit", function (event) {
    clearTimeout(pending);
    pending = null;
    if (resubmitting || (inFlight === 0 && unsent === 0)) {
      resubmitting = false;
      return;
    }
    event.preventDefault();
    var submitter = event.submitter;
    saving.then(function () {
      resubmitting = true;
      form.requestSubmit(submitter);
    });
  });
  // Leaving the page (another answer, the queue, closing the tab) with a save not yet sent (the
  // last words of a comment, a label changed while another save was answered): send the page's
  // state anyway. A save of this page still in flight would change the revision under it, so
  // then the beacon goes without one rather than be refused as someone else's.
  window.addEventListener("pagehide", function () {
    if (pending === null && unsent === 0) return;
    clearTimeout(pending);
    pending = null;
    var data = new FormData(form);
    data.delete("new_claim");
    if (inFlight) data.delete("revision");
    // keepalive: the request outlives the page, and as JSON a refusal stays out of the next
    // page's messages.
    fetch(form.dataset.saveUrl, {
      method: "POST", body: data, keepalive: true, credentials: "same-origin",
      headers: { "Accept": "application/json" },
    });
  });

  form.addEventListener("change", function (event) {
    if (event.target.name === "new_claim") return;
    saveSoon(0);
  });
  form.addEventListener("input", function (event) {
    if (event.target.name === "comment") saveSoon(600);
  });
  claims.forEach(function (claim, i) {
    claim.addEventListener("click", function () { focusClaim(i); });
  });

  // The next claim without a label, after `index` and wrapping around; if all are labelled,
  // simply the next one.
  function firstOpenAfter(index) {
    for (var k = 1; k <= claims.length; k++) {
      var i = (index + k + claims.length) % claims.length;
      if (!claims[i].querySelector("input[type=radio]:checked")) return i;
    }
    return Math.min(index + 1, claims.length - 1);
  }

  document.addEventListener("keydown", function (event) {
    if (typing(event) || event.altKey || event.ctrlKey || event.metaKey) return;
    var key = event.key;
    if (key === "1" || key === "2" || key === "3") {
      var claim = claims[current];
      if (!claim) return;
      var radios = claim.querySelectorAll("input[type=radio]");
      var radio = radios[Number(key) - 1];
      if (radio) {
        event.preventDefault();
        radio.checked = true;
        radio.dispatchEvent(new Event("change", { bubbles: true }));
        focusClaim(firstOpenAfter(current));
      }
    } else if ((key === "ArrowDown" || key === "ArrowUp") && event.target.type === "radio") {
      return;  // arrows in a group of choices move between its choices, as everywhere
    } else if (key === "j" || key === "ArrowDown") {
      event.preventDefault();
      focusClaim(current + 1);
    } else if (key === "k" || key === "ArrowUp") {
      event.preventDefault();
      focusClaim(current - 1);
    } else if (key === "Enter") {
      if (event.target.closest("button, a")) return;
      event.preventDefault();
      clearTimeout(pending);
      saving.then(function () { form.requestSubmit(document.getElementById("submit-review")); });
    }
  });

  focusClaim(Math.max(0, firstOpenAfter(-1)));
})();
