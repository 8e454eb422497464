/* Application dashboard: fetches the downsampled series and draws six charts on one shared, zoomable time axis. */
(function () {
  "use strict";
  var el = document.getElementById("charts");
  if (!el || !window.Plotly) { return; }
  var url = el.dataset.url;
  var range = el.dataset.range;
  var zoom = null;            // [startMs, endMs] while zoomed in
  var busy = false;
  var statusEl = document.getElementById("chart-status");
  var ROWS = [
    {key: "rate", title: "Input rate and processing capacity (tuples/s)"},
    {key: "rt", title: "End-to-end response time vs R_max (ms); violations shaded"},
    {key: "burn", title: "Budget burn-down: violation / reconfiguration fraction vs η_V / η_R"},
    {key: "cost", title: "Cost per hour by node type (currency/h)"},
    {key: "cum", title: "Cumulative cost by node type (currency)"},
    {key: "reps", title: "Replicas per operator, stacked by node type"}
  ];
  var GAP = 0.035, H = (1 - GAP * (ROWS.length - 1)) / ROWS.length;
  var PALETTE = ["#0b5cad", "#d1495b", "#edae49", "#00798c", "#30638e", "#66a182", "#8d6a9f", "#c96c3c",
                 "#3d405b", "#81b29a", "#e07a5f", "#6d597a"];

  function domain(i) { var top = 1 - i * (H + GAP); return [top - H, top]; }
  function axisName(i, kind) { return kind + (i === 0 ? "" : String(i + 1)); }
  function ref(i, kind) { return kind.charAt(0) + (i === 0 ? "" : String(i + 1)); }

  function layout(d) {
    var lay = {
      height: 1500, margin: {l: 70, r: 20, t: 30, b: 40}, showlegend: true,
      legend: {orientation: "h", y: -0.03}, hovermode: "x unified", annotations: [], shapes: [],
      uirevision: "keep"
    };
    ROWS.forEach(function (row, i) {
      var dom = domain(i);
      lay[axisName(i, "xaxis")] = {type: "date", anchor: ref(i, "y"), matches: i ? "x" : undefined,
                                    showticklabels: true, domain: [0, 1]};
      lay[axisName(i, "yaxis")] = {domain: dom, anchor: ref(i, "x"), rangemode: "tozero",
                                    title: {text: ["tuples/s", "ms", "fraction", "currency/h", "currency", "replicas"][i]}};
      lay.annotations.push({text: "<b>" + row.title + "</b>", xref: "paper", yref: "paper", x: 0,
                            y: dom[1] + 0.004, xanchor: "left", yanchor: "bottom", showarrow: false});
    });
    lay[axisName(ROWS.length - 1, "xaxis")].title = {text: "time (UTC)"};
    if (zoom) { lay.xaxis.range = [new Date(zoom[0]).toISOString(), new Date(zoom[1]).toISOString()]; }
    // the response-time axis stops at RT_CLIP x R_max so that R_max stays readable under 10-s spikes
    if (!d.empty) {
      var top = rtTop(d);
      lay.yaxis2.range = [0, top * 1.05];
      lay.yaxis2.autorange = false;
      if (d.rtMaxMs !== null && d.rtMaxMs > top) {
        lay.yaxis2.title.text = "ms (clipped at " + RT_CLIP + " × R_max)";
      }
    }
    // R_max and the budgets as dashed lines
    lay.shapes.push(hline(1, d.rMaxMs, "#b42318"), hline(2, d.etaV, "#b42318"), hline(2, d.etaR, "#8250df"));
    // slots without a decision: a grey band over every chart, labelled with the reason
    (d.gaps || []).forEach(function (g) {
      lay.shapes.push({type: "rect", xref: "x", yref: "paper", x0: g[0], x1: g[1], y0: 0, y1: 1,
                       fillcolor: "rgba(110,110,110,0.15)", line: {width: 0}, layer: "below",
                       label: {text: "missed: " + g[2].replace(/_/g, " "), textangle: -90,
                               font: {size: 10, color: "#555"}}});
    });
    return lay;
  }
  var RT_CLIP = 3;  // the response-time axis shows at most this many times R_max
  function rtTop(d) {
    var highest = d.rtMaxMs === null ? d.rMaxMs : Math.max(d.rtMaxMs, d.rMaxMs);
    return Math.min(highest, RT_CLIP * d.rMaxMs);
  }
  function hline(i, y, color) {
    return {type: "line", xref: ref(i, "x") + " domain", yref: ref(i, "y"), x0: 0, x1: 1, y0: y, y1: y,
            line: {color: color, width: 1.5, dash: "dash"}};
  }
  function line(i, x, y, name, color, extra) {
    var t = {type: "scatter", mode: "lines", x: x, y: y, name: name, xaxis: ref(i, "x"), yaxis: ref(i, "y"),
             line: {color: color, width: 1.5}};
    return Object.assign(t, extra || {});
  }

  function traces(d) {
    var out = [];
    if (d.empty) { return out; }
    out.push(line(0, d.rate.x, d.rate.y, "input rate", PALETTE[0]));
    out.push(line(0, d.capacity.x, d.capacity.y, "capacity", PALETTE[3], {line: {shape: "hv", color: PALETTE[3]}}));
    // violated periods: one filled trace of rectangles (hundreds of layout shapes draw several times slower)
    if (d.violations && d.violations.length) {
      var vx = [], vy = [], vtop = rtTop(d) * 1.05;
      d.violations.forEach(function (iv) {
        vx.push(iv[0], iv[0], iv[1], iv[1], null);
        vy.push(0, vtop, vtop, 0, null);
      });
      out.push({type: "scatter", mode: "lines", x: vx, y: vy, xaxis: "x2", yaxis: "y2", fill: "toself",
                fillcolor: "rgba(180,35,24,0.15)", line: {width: 0}, hoverinfo: "skip",
                name: "violated periods"});
    }
    out.push(line(1, d.rt.x, d.rt.y, "response time", PALETTE[4]));
    if (d.saturated && d.saturated.length) {
      var top = rtTop(d);
      out.push({type: "scatter", mode: "markers", name: "saturated (> R_max, unbounded)", xaxis: "x2", yaxis: "y2",
                x: d.saturated.map(function (iv) { return iv[0]; }), y: d.saturated.map(function () { return top; }),
                text: d.saturated.map(function (iv) {
                  return "> R_max, saturated for " + Math.round((iv[1] - iv[0]) / 1000) + " s";
                }),
                hovertemplate: "%{text}<extra></extra>",
                marker: {symbol: "triangle-up", size: 9, color: "#b42318"}});
    }
    out.push(line(2, d.burn.x, d.burn.violation, "violations (since range start)", "#b42318"));
    out.push(line(2, d.burn.x, d.burn.violationWindow, "violations (last " + d.burn.window + " periods)",
                  "#b42318", {line: {dash: "dot", color: "#b42318", width: 1}}));
    out.push(line(2, d.burn.x, d.burn.reconfiguration, "reconfigurations (since range start)", "#8250df"));
    out.push(line(2, d.burn.x, d.burn.reconfigurationWindow, "reconfigurations (last " + d.burn.window + " periods)",
                  "#8250df", {line: {dash: "dot", color: "#8250df", width: 1}}));
    d.cost.types.forEach(function (ty, j) {
      out.push({type: "scatter", mode: "lines", stackgroup: "cost", name: ty + " cost/h", x: d.cost.x,
                y: d.cost.perHour[ty], xaxis: "x4", yaxis: "y4", line: {color: PALETTE[(j + 5) % PALETTE.length]}});
      out.push({type: "scatter", mode: "lines", stackgroup: "cum", name: ty + " cumulative", x: d.cost.x,
                y: d.cost.cumulative[ty], xaxis: "x5", yaxis: "y5", showlegend: false,
                line: {color: PALETTE[(j + 5) % PALETTE.length]}});
    });
    d.replicas.series.forEach(function (s, j) {
      out.push({type: "scatter", mode: "lines", stackgroup: "reps", name: s.operator + " on " + s.type,
                x: d.replicas.x, y: s.y, xaxis: "x6", yaxis: "y6", line: {shape: "hv", width: 0.5,
                color: PALETTE[j % PALETTE.length]}});
    });
    var granted = d.events.filter(function (e) { return e.outcome !== "denied"; });
    var denied = d.events.filter(function (e) { return e.outcome === "denied"; });
    [[granted, "scaling actions", "triangle-up", "#1a7f37"], [denied, "denied proposals", "x", "#b42318"]]
      .forEach(function (spec) {
        if (!spec[0].length) { return; }
        out.push({type: "scatter", mode: "markers", name: spec[1], xaxis: "x6", yaxis: "y6",
                  x: spec[0].map(function (e) { return e.t; }), y: spec[0].map(function () { return 0; }),
                  customdata: spec[0].map(function (e) { return e.url; }),
                  text: spec[0].map(function (e) { return e.operator + ": " + e.action + " (" + e.outcome + ")"; }),
                  hovertemplate: "%{text}<extra></extra>",
                  marker: {symbol: spec[2], size: 10, color: spec[3]}});
      });
    return out;
  }

  // plotly reports date-axis ranges as "YYYY-MM-DD HH:MM:SS.sss" in UTC (or as numbers / ISO strings)
  function toMs(v) {
    if (typeof v === "number") { return v; }
    var s = String(v).replace(" ", "T");
    if (!/(Z|[+-]\d\d:?\d\d)$/.test(s)) { s += "Z"; }
    return Date.parse(s);
  }

  function fmtTime(ms) { return new Date(ms).toISOString().replace("T", " ").slice(0, 19); }

  function fillEvents(events) {
    var body = document.querySelector("#events tbody");
    body.innerHTML = "";
    if (!events.length) {
      body.innerHTML = "<tr><td colspan='5' class='muted'>No scaling proposals in this range.</td></tr>";
      return;
    }
    events.slice().reverse().slice(0, 200).forEach(function (e) {
      var tr = document.createElement("tr");
      var a = document.createElement("a");
      a.href = e.url; a.textContent = fmtTime(e.t);
      var action = document.createElement("span");
      action.textContent = e.action;
      if (e.explored) {
        var badge = document.createElement("span");
        badge.className = "badge explored";
        badge.title = "the OM chose an action its own estimates did not rank best (exploration)";
        badge.textContent = "explored";
        action.appendChild(document.createTextNode(" "));
        action.appendChild(badge);
      }
      var cells = [a, e.operator, action, e.outcome, e.reason || ""];
      cells.forEach(function (c) {
        var td = document.createElement("td");
        if (typeof c === "string") { td.textContent = c; } else { td.appendChild(c); }
        tr.appendChild(td);
      });
      tr.dataset.outcome = e.outcome;
      body.appendChild(tr);
    });
  }

  // the rollup (built by the dashboard.rollup task, never by this request) may be behind the control loop
  var rollupEl = document.getElementById("rollup-status");
  function rollupNote(d) {
    if (!rollupEl) { return; }
    if (!d.behindPeriods) { rollupEl.textContent = ""; rollupEl.hidden = true; return; }
    rollupEl.hidden = false;
    rollupEl.textContent = (d.rolledToMs === null ? "Not rolled up yet" : "Rolled up to " + fmtTime(d.rolledToMs) +
      " UTC") + ": " + d.behindPeriods + " newer period" + (d.behindPeriods === 1 ? "" : "s") +
      " (to " + fmtTime(d.ledgerLastMs) + " UTC) not shown yet; the charts follow within a few seconds.";
  }

  var pending = false;       // a reload asked for while one was in flight (range change, zoom)
  function load() {
    if (busy) { pending = true; return; }
    busy = true;
    var points = window.chartPoints ? window.chartPoints() : 1000;
    var q = "?range=" + encodeURIComponent(range) + "&points=" + points;
    if (zoom) { q += "&start=" + Math.floor(zoom[0]) + "&end=" + Math.ceil(zoom[1]); }
    var started = performance.now();
    var pre = window.dashboardPrefetch;
    var answer;
    if (pre && pre.query === q) {  // the first draw: the request started before plotly's script was parsed
      window.dashboardPrefetch = null;
      started = pre.started;
      answer = pre.response;
    } else {
      answer = fetch(url + q, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); });
    }
    answer
      .then(function (d) {
        if (d.empty) {
          statusEl.textContent = "No periods recorded yet; the charts appear after the first control ticks.";
        } else {
          statusEl.textContent = d.rows + " periods in range, at most " + d.maxPoints + " points per series (" +
            Math.round(performance.now() - started) + " ms)";
        }
        rollupNote(d);
        return Plotly.react(el, traces(d), layout(d), {responsive: true, displaylogo: false}).then(function () {
          el.dataset.rows = String(d.rows);
          // time-to-chart (bench_dashboard reads it): the first time the charts are drawn after navigation
          if (window.performance && performance.mark && !performance.getEntriesByName("charts-drawn").length) {
            performance.mark("charts-drawn");
          }
          el.dataset.events = String(d.events.length);
          fillEvents(d.events);
        });
      })
      .catch(function (err) { statusEl.textContent = "Could not load the charts: " + err.message; })
      .then(function () {
        busy = false;
        if (pending) { pending = false; load(); }
      });
  }

  load();
  var bound = false;
  function bind() {
    if (bound || !el.on) { return; }
    bound = true;
    el.on("plotly_click", function (ev) {
      // with the unified hover a click reports every trace at that time: open the marker's decision, if any
      var p = (ev.points || []).filter(function (q) { return q.customdata; })[0];
      if (p) { window.location.href = p.customdata; }
    });
    el.on("plotly_relayout", function (ev) {
      if (ev["xaxis.autorange"] || ev["xaxis2.autorange"]) { zoom = null; load(); return; }
      var keys = Object.keys(ev).filter(function (k) { return /^xaxis\d*\.range\[0\]$/.test(k); });
      if (!keys.length) { return; }
      var a = ev[keys[0]], b = ev[keys[0].replace("[0]", "[1]")];
      zoom = [toMs(a), toMs(b)];
      load();
    });
  }
  var obs = new MutationObserver(function () { if (el.on) { bind(); } });
  obs.observe(el, {childList: true});
  document.querySelectorAll("#range-form input[name=range]").forEach(function (input) {
    input.addEventListener("change", function () {
      range = input.value; zoom = null;
      history.replaceState(null, "", "?range=" + encodeURIComponent(range));
      load();
    });
  });
  // live: refresh every 5 s while not zoomed in
  setInterval(function () { if (!zoom && !document.hidden) { load(); } }, 5000);
}());
