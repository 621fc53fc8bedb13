/* Wide tables on a narrow screen (issue 41): a table in a .table-wrap scrolls inside that box,
   and its edge must never cut a number ("0,84" read as "0,8"). After each scroll or resize, a
   body cell that shows only part of itself (at the box's right edge, or under a sticky first
   column) is hidden until it is whole again; the box gets the class "scrolls" (a shadow on the
   side where more is) while it is narrower than its table. data-checked-at says which scroll
   position was last looked at, so that a test can wait for it. */
(function () {
  "use strict";

  function check(wrap) {
    var box = wrap.getBoundingClientRect();
    var overflows = wrap.scrollWidth > wrap.clientWidth + 1;
    wrap.classList.toggle("scrolls", overflows);
    wrap.classList.toggle("scrolled", overflows && wrap.scrollLeft > 0);
    wrap.classList.toggle("at-end", !overflows || wrap.scrollLeft + wrap.clientWidth >= wrap.scrollWidth - 1);
    var left = box.left, right = box.left + wrap.clientWidth;
    var first = wrap.querySelector("tbody tr > :first-child");
    if (first && getComputedStyle(first).position === "sticky") {
      left = Math.max(left, first.getBoundingClientRect().right);
    }
    wrap.querySelectorAll("tbody td").forEach(function (cell) {
      var r = cell.getBoundingClientRect();
      var whole = r.left >= left - 0.5 && r.right <= right + 0.5;
      var out = r.right <= left + 0.5 || r.left >= right - 0.5;
      cell.classList.toggle("cut", overflows && !whole && !out);
    });
    wrap.setAttribute("data-checked-at", String(Math.round(wrap.scrollLeft)));
  }

  function watch(wrap) {
    var queued = false;
    function later() {
      if (queued) return;
      queued = true;
      requestAnimationFrame(function () { queued = false; check(wrap); });
    }
    wrap.addEventListener("scroll", later, { passive: true });
    window.addEventListener("resize", later);
    check(wrap);
  }

  function start() {
    document.querySelectorAll(".table-wrap").forEach(watch);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
