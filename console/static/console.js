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
})();
