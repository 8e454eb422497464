/* What-if: polls the run's status JSON, shows progress, then the side-by-side comparison and a cost chart. */
(function () {
  "use strict";
  var sec = document.getElementById("whatif-run");
  if (!sec) { return; }
  var url = sec.dataset.statusUrl;
  var bar = document.getElementById("whatif-progress");
  var state = document.getElementById("whatif-state");
  var out = document.getElementById("whatif-result");

  function fmt(v, digits) { return v === null || v === undefined ? "–" : Number(v).toFixed(digits); }
  function pct(v) { return v === null || v === undefined ? "–" : (100 * v).toFixed(2) + " %"; }
  function cmp(a, b) { return a < b - 1e-12 ? "better" : (a > b + 1e-12 ? "worse" : ""); }

  function render(res) {
    var s = res.simulated, a = res.actual;
    var rows = [
      ["Cost per hour (currency/h)", fmt(a.costPerHour, 4), fmt(s.costPerHour, 4), cmp(s.costPerHour, a.costPerHour)],
      ["Total cost over the trace (currency)", fmt(a.totalCost, 4), fmt(s.totalCost, 4), cmp(s.totalCost, a.totalCost)],
      ["Violations (fraction of periods)", pct(a.violationFraction) + (a.violationsMet ? " ✓" : " ✗ over η_V"),
       pct(s.violationFraction) + (s.violationsMet ? " ✓" : " ✗ over η_V"), cmp(s.violationFraction, a.violationFraction)],
      ["Reconfigurations (fraction of periods)", pct(a.reconfigurationFraction) + (a.reconfigurationsMet ? " ✓" : " ✗ over η_R"),
       pct(s.reconfigurationFraction) + (s.reconfigurationsMet ? " ✓" : " ✗ over η_R"),
       cmp(s.reconfigurationFraction, a.reconfigurationFraction)],
      ["Average replicas (all operators)", fmt(a.avgReplicas, 2), fmt(s.avgReplicas, 2), ""]
    ];
    var html = "<p>" + res.steps + " recorded periods of " + res.periodS + " s replayed. Recorded: " +
      res.recorded.policy + ", R_max " + res.recorded.rMaxMs + " ms; what-if: " + res.params.policy + ", R_max " +
      res.params.rMaxMs + " ms, η_V " + res.etaV + ", η_R " + res.etaR + ".</p>" +
      "<div class='table-wrap'><table class='compare' id='whatif-compare'><caption>What happened vs what-if</caption>" +
      "<thead><tr><th scope='col'>Measure</th><th scope='col' class='num'>What happened</th>" +
      "<th scope='col' class='num'>What-if (simulated)</th></tr></thead><tbody>";
    rows.forEach(function (r) {
      html += "<tr><th scope='row'>" + r[0] + "</th><td class='num'>" + r[1] + "</td><td class='num " + r[3] + "'>" +
        r[2] + "</td></tr>";
    });
    out.innerHTML = html + "</tbody></table></div>";
    if (window.Plotly) {
      var x = res.series.x;
      Plotly.newPlot("whatif-chart", [
        {type: "scatter", mode: "lines", x: x, y: res.series.actualCostPerHour, name: "what happened (currency/h)"},
        {type: "scatter", mode: "lines", x: x, y: res.series.simulatedCostPerHour, name: "what-if (currency/h)"},
        {type: "scatter", mode: "lines", x: x, y: res.series.rate, name: "input rate (tuples/s)", yaxis: "y2",
         line: {color: "#999", width: 1}}
      ], {title: {text: "Cost per hour: what happened vs what-if (currency/h), input rate (tuples/s)"},
          xaxis: {type: "date", title: {text: "time (UTC)"}}, yaxis: {title: {text: "currency/h"}, rangemode: "tozero"},
          yaxis2: {title: {text: "tuples/s"}, overlaying: "y", side: "right", rangemode: "tozero"},
          legend: {orientation: "h"}, height: 360, margin: {l: 60, r: 60, t: 50, b: 40}},
        {responsive: true, displaylogo: false});
    }
  }

  function poll() {
    fetch(url, {credentials: "same-origin"}).then(function (r) { return r.json(); }).then(function (d) {
      bar.value = d.progress;
      bar.textContent = Math.round(100 * d.progress) + " %";
      state.textContent = d.status + (d.status === "running" || d.status === "queued" ?
        " (" + Math.round(100 * d.progress) + " %)" : "");
      sec.dataset.status = d.status;
      if (d.status === "done") { render(d.result); return; }
      if (d.status === "failed") { out.innerHTML = "<p class='form-errors' role='alert'></p>";
        out.firstChild.textContent = "The what-if failed: " + d.error; return; }
      setTimeout(poll, 500);
    }).catch(function () { setTimeout(poll, 2000); });
  }
  poll();
}());
