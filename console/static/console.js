// runcore console: the token box and a polling refresh. No framework, no build step.
"use strict";
(function () {
  var KEY = "runcore-console-token";
  var box = document.getElementById("token-box");

  // `#token=…` in the address (never sent to the server) fills the box once.
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    try { sessionStorage.setItem(KEY, decodeURIComponent(match[1])); } catch (e) {}
    history.replaceState(null, "", location.pathname + location.search);
  }
  function stored() {
    try { return sessionStorage.getItem(KEY) || ""; } catch (e) { return ""; }
  }
  // A console started with --allow-remote needs the token on every request, page loads too:
  // keep it in a same-site cookie for this console, and reload a page refused for want of it.
  var known = stored();
  if (known) {
    document.cookie = "runcore_token=" + encodeURIComponent(known) + "; path=/; SameSite=Strict";
    if (document.getElementById("needs-token") && !sessionStorage.getItem(KEY + "-retried")) {
      try { sessionStorage.setItem(KEY + "-retried", "1"); } catch (e) {}
      location.reload();
    }
  }
  if (!document.getElementById("needs-token")) {
    try { sessionStorage.removeItem(KEY + "-retried"); } catch (e) {}
  }
  if (box) {
    box.value = stored();
    box.addEventListener("input", function () {
      try { sessionStorage.setItem(KEY, box.value.trim()); } catch (e) {}
    });
  }

  // Every write carries the token in its form field.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var field = form.querySelector("input[name=token]");
    if (field) { field.value = box ? box.value.trim() : stored(); }
  });

  // Refresh the page's main part every few seconds while it is open and visible, unless the
  // person is typing in it.
  function busy() {
    var active = document.activeElement;
    if (active && active.closest && active.closest("#main") && active.tagName === "INPUT") {
      return true;
    }
    var inputs = document.querySelectorAll("#main input[type=text]");
    for (var i = 0; i < inputs.length; i++) { if (inputs[i].value) { return true; } }
    return false;
  }
  function refresh() {
    if (document.visibilityState !== "visible" || busy()) { return; }
    fetch(location.href, { cache: "no-store", credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null || busy()) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var main = document.getElementById("main");
        if (fresh && main && fresh.innerHTML !== main.innerHTML) {
          main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
        }
      })
      .catch(function () {});
  }
  setInterval(refresh, 2000);

  // Times are rendered in UTC with "… ago" by the server; show them in the reader's local
  // time (the raw ms stay in the tooltip).
  function localTimes() {
    var times = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      if (el.dataset.local) { continue; }
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) { continue; }
      var text = el.textContent;
      var dot = text.indexOf(" · ");
      el.textContent = when.toLocaleString() + (dot >= 0 ? text.slice(dot) : "");
      el.dataset.local = "1";
    }
  }
  localTimes();
  new MutationObserver(localTimes).observe(document.body, { childList: true, subtree: true });
})();
