// Auto-refresh without a full reload: every few seconds the page is
// fetched again and its <main> replaced. Everything is readable without
// this script; it only keeps the numbers current. A refresh that lands on
// the sign-in page (the session ended) reloads the whole page.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh-seconds") || "0");
  if (!(seconds > 0)) return;
  var state = document.getElementById("refresh-state");
  function typing() {
    var a = document.activeElement;
    return a && (a.tagName === "INPUT" || a.tagName === "TEXTAREA");
  }
  function refresh() {
    if (document.hidden || typing()) return;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Tidemark-Refresh": "1" } })
      .then(function (response) {
        if (response.redirected || response.status === 401 || response.status === 403) {
          window.location.reload();
          return null;
        }
        return response.text();
      })
      .then(function (text) {
        if (text === null) return;
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("content");
        var current = document.getElementById("content");
        if (fresh && current) {
          current.replaceWith(document.adoptNode(fresh));
          document.body.setAttribute("data-refreshed-at", String(Date.now()));
          if (state) state.textContent = "refreshed " + new Date().toLocaleTimeString();
        }
      })
      .catch(function () {
        if (state) state.textContent = "refresh failed; retrying";
      });
  }
  window.setInterval(refresh, seconds * 1000);
})();
