// River UI for Python: the page's only script (the Content-Security-Policy forbids inline script).
// - Refresh: every data-refresh seconds, fetch this page again and swap <main id="live">,
//   unless the reader is busy (a box ticked, a field focused, the page hidden, refresh off).
// - "Select all" for the job list, and a confirmation before destructive actions.
(function () {
  "use strict";

  function busy(live) {
    if (document.hidden) return true;
    var toggle = document.getElementById("auto-refresh");
    if (toggle && !toggle.checked) return true;
    if (live.querySelector("input.select:checked, #select-all:checked")) return true;
    var active = document.activeElement;
    return !!(active && live.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName));
  }

  function refresh() {
    var live = document.getElementById("live");
    if (!live || busy(live)) return;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-River-UI-Refresh": "1" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null || busy(live)) return;
        // A parsed document runs no script; the new <main> replaces the old one's content.
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (fresh) live.replaceChildren.apply(live, Array.prototype.slice.call(fresh.childNodes));
      })
      .catch(function () { /* the next tick tries again */ });
  }

  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.id === "select-all") {
      var boxes = document.querySelectorAll("input.select");
      for (var i = 0; i < boxes.length; i++) boxes[i].checked = target.checked;
    }
  });

  document.addEventListener("click", function (event) {
    var button = event.target && event.target.closest ? event.target.closest("button[data-confirm]") : null;
    if (button && !window.confirm(button.getAttribute("data-confirm"))) event.preventDefault();
  });

  var seconds = parseInt(document.body.getAttribute("data-refresh"), 10);
  if (seconds > 0) window.setInterval(refresh, seconds * 1000);
})();
