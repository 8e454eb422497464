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
    if (window.Plotly) { draw(res); }
  }

  // Layout in pixels, top to bottom: the title (wrapped to the width), the legend (rows as plotly wraps its
  // entries), the plot, the date labels; laid out again when the width changes, so nothing overprints.
  var FONT = "12px \"Open Sans\", verdana, arial, sans-serif";
  var measure = document.createElement("canvas").getContext("2d");
  var chart = document.getElementById("whatif-chart");
  var TITLE = "Cost per hour: what happened vs what-if (currency/h), input rate (tuples/s)";
  var NAMES = ["what happened (currency/h)", "what-if (currency/h)", "input rate (tuples/s)"];
  var lastRes = null;

  function wrap(text, maxW) {
    measure.font = "bold 14px \"Open Sans\", verdana, arial, sans-serif";
    var lines = [], cur = "";
    text.split(" ").forEach(function (w) {
      var next = cur ? cur + " " + w : w;
      if (cur && measure.measureText(next).width > maxW) { lines.push(cur); cur = w; } else { cur = next; }
    });
    if (cur) { lines.push(cur); }
    return lines;
  }

  function layout() {
    var W = Math.max(300, chart.clientWidth || 800), narrow = W < 600;
    var M = {l: 60, r: 60, b: narrow ? 50 : 56};
    var plotW = W - M.l - M.r;
    measure.font = FONT;
    // plotly gives each entry its text width ("entrywidth") + 40 px (symbol, gaps) + 5 px between entries
    var entry = Math.min(plotW - 45, Math.ceil(Math.max.apply(null, NAMES.map(function (n) {
      return measure.measureText(n).width; })) + 6));
    var perRow = Math.max(1, Math.floor(plotW / (entry + 45)));
    var legendH = Math.ceil(NAMES.length / perRow) * 19 + 12;
    var lines = wrap(TITLE, W - 16), titleH = lines.length * 19 + 10;
    var H = titleH + legendH + 240 + M.b;
    return {
      width: W, height: H, autosize: false, margin: {l: M.l, r: M.r, t: titleH + legendH, b: M.b},
      font: {family: "\"Open Sans\", verdana, arial, sans-serif", size: 12},
      // the title as a bold annotation: plotly shifts a multi-line layout title above its anchor
      annotations: [{text: "<b>" + lines.join("<br>") + "</b>", xref: "paper", x: 0, xshift: 8 - M.l,
                     xanchor: "left", yref: "paper", y: 1, yshift: titleH + legendH - 6, yanchor: "top",
                     align: "left", showarrow: false, font: {size: 14}}],
      xaxis: {type: "date", title: {text: "time (UTC)", standoff: 4}, nticks: narrow ? 3 : 8, automargin: false,
              ticklabelstandoff: 6},
      yaxis: {title: {text: "currency/h"}, rangemode: "tozero", automargin: false},
      yaxis2: {title: {text: "tuples/s"}, overlaying: "y", side: "right", rangemode: "tozero", automargin: false},
      legend: {orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom", entrywidth: entry,
               entrywidthmode: "pixels", traceorder: "normal", bgcolor: "rgba(255,255,255,0)"}
    };
  }

  function draw(res) {
    lastRes = res;
    var x = res.series.x;
    Plotly.react(chart, [
      {type: "scatter", mode: "lines", x: x, y: res.series.actualCostPerHour, name: NAMES[0]},
      {type: "scatter", mode: "lines", x: x, y: res.series.simulatedCostPerHour, name: NAMES[1]},
      {type: "scatter", mode: "lines", x: x, y: res.series.rate, name: NAMES[2], yaxis: "y2",
       line: {color: "#999", width: 1}}
    ], layout(), {displaylogo: false}).then(function () {
      chart.dataset.layoutWidth = String(Math.max(300, chart.clientWidth || 800));  // tests wait for a re-layout
    });
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      if (lastRes && String(Math.max(300, chart.clientWidth || 800)) !== chart.dataset.layoutWidth) { draw(lastRes); }
    }, 100);
  });

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
