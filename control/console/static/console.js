// spamd console: the little the pages do in the browser. Everything works
// without it but the feature bars and the history's auto-refresh.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Feature bars: their width is the feature's share of the largest
  // weight of its list (set here: the page's policy forbids inline style).
  document.querySelectorAll(".bar[data-w]").forEach(function (el) {
    el.style.width = el.dataset.w + "%";
  });
  // History: reload every 5 s while the box is ticked.
  var box = document.getElementById("autorefresh");
  if (box) {
    box.checked = sessionStorage.getItem("spamd-autorefresh") === "1";
    box.addEventListener("change", function () {
      sessionStorage.setItem("spamd-autorefresh", box.checked ? "1" : "0");
    });
    setInterval(function () {
      if (box.checked) location.reload();
    }, 5000);
  }
});
