/* Application dashboard: starts fetching the charts' data as soon as the page's head is read (an async script,
   not held back by the stylesheets or by parsing plotly's script); monitor_dashboard.js takes the answer from
   window.dashboardPrefetch for its first draw. */
// points per series: one per pixel of the viewport's width (no more than can be drawn), within the server's bounds
window.chartPoints = function () {
  "use strict";
  return Math.max(100, Math.min(2000, Math.round(document.documentElement.clientWidth || 1000)));
};
(function () {
  "use strict";
  var me = document.currentScript;
  if (!me || !window.fetch) { return; }
  var q = "?range=" + encodeURIComponent(me.dataset.range) + "&points=" + window.chartPoints();
  window.dashboardPrefetch = {
    query: q,
    started: performance.now(),
    response: fetch(me.dataset.url + q, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
  };
  window.dashboardPrefetch.response.catch(function () {});  // reported by monitor_dashboard.js
}());
