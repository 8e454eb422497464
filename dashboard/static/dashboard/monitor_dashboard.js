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
    {key: "rate", title: "Input rate and processing capacity (tuples/s)", short: "Input rate and capacity (tuples/s)",
     unit: "tuples/s"},
    {key: "rt", title: "End-to-end response time vs R_max (ms); violations shaded",
     short: "Response time vs R_max (ms)", unit: "ms"},
    {key: "burn", title: "Budget burn-down: violation / reconfiguration fraction vs η_V / η_R",
     short: "Budget burn-down vs η_V / η_R", unit: "fraction"},
    {key: "cost", title: "Cost per hour by node type (currency/h)", short: "Cost per hour by node type (currency/h)",
     unit: "currency/h"},
    {key: "cum", title: "Cumulative cost by node type (currency)", short: "Cumulative cost by node type (currency)",
     unit: "currency"},
    {key: "reps", title: "Replicas per operator, stacked by node type", short: "Replicas per operator and node type",
     unit: "replicas"}
  ];
  // stable colours: node types by their place in the application's catalog, operators by name order (the same
  // type or operator has the same colour in every chart, whatever the range shows)
  var TYPE_COLORS = ["#0b5cad", "#c96c3c", "#66a182", "#8d6a9f", "#edae49", "#3d405b", "#d1495b", "#00798c"];
  var OP_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
  function typeColor(d, ty) { var i = (d.nodeTypes || []).indexOf(ty); return TYPE_COLORS[(i < 0 ? 0 : i) % TYPE_COLORS.length]; }
  function opColor(d, op) { var i = (d.operators || []).indexOf(op); return OP_COLORS[(i < 0 ? 0 : i) % OP_COLORS.length]; }
  function alpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  function axisName(i, kind) { return kind + (i === 0 ? "" : String(i + 1)); }
  function ref(i, kind) { return kind.charAt(0) + (i === 0 ? "" : String(i + 1)); }
  function legendName(i) { return i === 0 ? "legend" : "legend" + (i + 1); }

  // Layout in pixels, top to bottom per chart: its title, its own legend, the plot, its date labels. Every block
  // gets the height its content needs at the current width, so nothing overprints the next chart's title.
  var FONT = "12px \"Open Sans\", verdana, arial, sans-serif";
  var measure = document.createElement("canvas").getContext("2d");
  function textWidth(t) { measure.font = FONT; return measure.measureText(t).width; }
  var M = {l: 62, r: 14, t: 8, b: 8};
  var LEGEND_ROW_H = 19, LEGEND_PAD_H = 12, TICKS_H = 46, GAP_H = 16;  // as plotly draws them (px)

  // a title's lines (words kept whole) that fit ``maxW`` pixels in the bold 13-px title font
  function wrap(text, maxW) {
    measure.font = "bold 13px \"Open Sans\", verdana, arial, sans-serif";
    var lines = [], cur = "";
    text.split(" ").forEach(function (w) {
      var next = cur ? cur + " " + w : w;
      if (cur && measure.measureText(next).width > maxW) { lines.push(cur); cur = w; } else { cur = next; }
    });
    if (cur) { lines.push(cur); }
    return lines;
  }
  function legendBlock(names, plotW) {
    if (!names.length) { return {h: 0, entry: 0}; }
    // plotly gives each entry its text width ("entrywidth") + 40 px (symbol, gaps) + 5 px between entries
    var entry = Math.ceil(Math.max.apply(null, names.map(textWidth)) + 6);
    entry = Math.min(entry, plotW - 45);
    var perRow = Math.max(1, Math.floor(plotW / (entry + 45)));
    return {h: Math.ceil(names.length / perRow) * LEGEND_ROW_H + LEGEND_PAD_H, entry: entry};
  }

  function layout(d, data, measured) {
    var W = Math.max(300, el.clientWidth || 1000), narrow = W < 600;
    var plotW = W - M.l - M.r, plotH = narrow ? 170 : 200;
    var blocks = ROWS.map(function (row, i) {
      var names = data.filter(function (t) { return t.legend === legendName(i) && t.showlegend !== false; })
        .map(function (t) { return t.name; });
      var lines = wrap(narrow ? row.short : row.title, W - M.r - 4);
      var legend = legendBlock(names, plotW);
      if (measured && measured[i] > legend.h) { legend.h = measured[i]; }  // as plotly wrapped it
      return {titleH: lines.length * 17 + 5, title: lines.join("<br>"), legend: legend};
    });
    var H = M.t + M.b;
    blocks.forEach(function (b) { b.top = H - M.b; H += b.titleH + b.legend.h + plotH + TICKS_H + GAP_H; });
    var paperH = H - M.t - M.b;
    function py(px) { return 1 - px / paperH; }  // pixels from the paper's top -> paper fraction
    var lay = {
      width: W, height: H, margin: Object.assign({}, M), autosize: false, hovermode: "x unified",
      annotations: [], shapes: [], uirevision: "keep",
      font: {family: "\"Open Sans\", verdana, arial, sans-serif", size: 12}
    };
    ROWS.forEach(function (row, i) {
      var b = blocks[i], y0 = b.top + b.titleH + b.legend.h;
      lay[axisName(i, "xaxis")] = {type: "date", anchor: ref(i, "y"), matches: i ? "x" : undefined,
                                    showticklabels: true, domain: [0, 1], automargin: false,
                                    nticks: narrow ? 4 : 8,
                                    // below the y axis's lowest label, which a date at the left edge would touch
                                    ticklabelstandoff: 6};
      lay[axisName(i, "yaxis")] = {domain: [py(y0 + plotH), py(y0)], anchor: ref(i, "x"), rangemode: "tozero",
                                    automargin: false, nticks: 5,
                                    title: {text: narrow ? "" : row.unit, standoff: 4}};
      lay.annotations.push({text: "<b>" + b.title + "</b>",
                            xref: "paper", yref: "paper", x: 0, xshift: -M.l + 4, y: py(b.top), xanchor: "left",
                            yanchor: "top",
                            align: "left", showarrow: false, font: {size: 13}});
      lay[legendName(i)] = {orientation: "h", x: 0, xanchor: "left", y: py(b.top + b.titleH), yanchor: "top",
                            entrywidth: b.legend.entry, entrywidthmode: "pixels", font: {size: 12},
                            traceorder: "normal",  // not "grouped" (columns per group): rows as estimated
                            bgcolor: "rgba(255,255,255,0)", tracegroupgap: 0};
    });
    lay.showlegend = true;
    reserved = blocks.map(function (b) { return b.legend.h; });
    lay[axisName(ROWS.length - 1, "xaxis")].title = {text: narrow ? "" : "time (UTC)", standoff: 2};
    if (zoom) { lay.xaxis.range = [new Date(zoom[0]).toISOString(), new Date(zoom[1]).toISOString()]; }
    // the response-time axis stops at RT_CLIP x R_max so that R_max stays readable under 10-s spikes
    if (!d.empty) {
      var top = rtTop(d);
      lay.yaxis2.range = [0, top * 1.05];
      lay.yaxis2.autorange = false;
      if (d.rtMaxMs !== null && d.rtMaxMs > top && !narrow) {
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
  var SAT_AT = 1.5;  // saturated markers sit at the axis top, at least this many times R_max: above its line
  function rtTop(d) {
    var highest = d.rtMaxMs === null ? d.rMaxMs : Math.max(d.rtMaxMs, d.rMaxMs);
    if (d.saturated && d.saturated.length) { highest = Math.max(highest, SAT_AT * d.rMaxMs); }
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
    function add(i, t) { t.legend = legendName(i); out.push(t); }
    add(0, line(0, d.rate.x, d.rate.y, "input rate", "#0b5cad"));
    add(0, line(0, d.capacity.x, d.capacity.y, "capacity", "#00798c", {line: {shape: "hv", color: "#00798c", width: 1.5}}));
    // violated periods: one filled trace of rectangles (hundreds of layout shapes draw several times slower)
    if (d.violations && d.violations.length) {
      var vx = [], vy = [], vtop = rtTop(d) * 1.05;
      d.violations.forEach(function (iv) {
        vx.push(iv[0], iv[0], iv[1], iv[1], null);
        vy.push(0, vtop, vtop, 0, null);
      });
      add(1, {type: "scatter", mode: "lines", x: vx, y: vy, xaxis: "x2", yaxis: "y2", fill: "toself",
              fillcolor: "rgba(180,35,24,0.15)", line: {width: 0}, hoverinfo: "skip", name: "violated periods"});
    }
    add(1, line(1, d.rt.x, d.rt.y, "response time", "#30638e"));
    if (d.saturated && d.saturated.length) {
      var top = rtTop(d);
      add(1, {type: "scatter", mode: "markers", name: "saturated (> R_max, unbounded)", xaxis: "x2", yaxis: "y2",
              x: d.saturated.map(function (iv) { return iv[0]; }), y: d.saturated.map(function () { return top; }),
              text: d.saturated.map(function (iv) {
                return "> R_max, saturated for " + Math.round((iv[1] - iv[0]) / 1000) + " s";
              }),
              hovertemplate: "%{text}<extra></extra>",
              marker: {symbol: "triangle-up", size: 9, color: "#b42318"}});
    }
    add(2, line(2, d.burn.x, d.burn.violation, "violations (since range start)", "#b42318"));
    add(2, line(2, d.burn.x, d.burn.violationWindow, "violations (last " + d.burn.window + " periods)",
                "#b42318", {line: {dash: "dot", color: "#b42318", width: 1}}));
    add(2, line(2, d.burn.x, d.burn.reconfiguration, "reconfigurations (since range start)", "#8250df"));
    add(2, line(2, d.burn.x, d.burn.reconfigurationWindow, "reconfigurations (last " + d.burn.window + " periods)",
                "#8250df", {line: {dash: "dot", color: "#8250df", width: 1}}));
    d.cost.types.forEach(function (ty) {
      var c = typeColor(d, ty);
      add(3, {type: "scatter", mode: "lines", stackgroup: "cost", name: ty, x: d.cost.x, legendgroup: "type-" + ty,
              y: d.cost.perHour[ty], xaxis: "x4", yaxis: "y4", line: {color: c, width: 1}, fillcolor: alpha(c, 0.45)});
      add(4, {type: "scatter", mode: "lines", stackgroup: "cum", name: ty, x: d.cost.x, legendgroup: "type-" + ty,
              y: d.cost.cumulative[ty], xaxis: "x5", yaxis: "y5", line: {color: c, width: 1}, fillcolor: alpha(c, 0.45)});
    });
    // replicas: the operator's colour, one shade per node type (the type's place in the catalog)
    d.replicas.series.forEach(function (s) {
      var c = opColor(d, s.operator), k = Math.max(0, (d.nodeTypes || []).indexOf(s.type));
      add(5, {type: "scatter", mode: "lines", stackgroup: "reps", name: s.operator + " on " + s.type,
              legendgroup: "op-" + s.operator, x: d.replicas.x, y: s.y, xaxis: "x6", yaxis: "y6",
              line: {shape: "hv", width: 0.5, color: c}, fillcolor: alpha(c, [0.7, 0.4, 0.2, 0.1][k % 4])});
    });
    var granted = d.events.filter(function (e) { return e.outcome !== "denied"; });
    var denied = d.events.filter(function (e) { return e.outcome === "denied"; });
    [[granted, "scaling actions", "triangle-up", "#1a7f37"], [denied, "denied proposals", "x", "#b42318"]]
      .forEach(function (spec) {
        if (!spec[0].length) { return; }
        add(5, {type: "scatter", mode: "markers", name: spec[1], xaxis: "x6", yaxis: "y6",
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

  var lastData = null;
  var reserved = [];  // the legends' heights the last layout reserved (px)
  // each legend's drawn height (px), or 0 when it has no entries
  function legendHeights() {
    return ROWS.map(function (row, i) {
      var g = el.querySelector("g." + legendName(i) + " rect.bg");
      return g ? Math.ceil(g.getBoundingClientRect().height) + 6 : 0;
    });
  }
  function draw(d) {
    var data = traces(d), lay = layout(d, data);
    // not plotly's "responsive": it would size the figure to the container's height; the resize handler below
    // lays it out again for the new width (explicit width and height)
    return Plotly.react(el, data, lay, {displaylogo: false}).then(function () {
      // a legend plotly wrapped onto more rows than estimated: lay out again with the heights it drew
      var drawn = legendHeights();
      var tight = reserved.some(function (h, i) { return drawn[i] > h + 1; });
      if (tight) { lay = layout(d, data, drawn); return Plotly.react(el, data, lay, {displaylogo: false}); }
    }).then(function () {
      el.dataset.layoutWidth = String(Math.max(300, el.clientWidth || 1000));  // tests wait for a re-layout
    });
  }
  // the heights of titles and legends depend on the width: lay the charts out again when it changes
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      if (lastData && String(Math.max(300, el.clientWidth || 1000)) !== el.dataset.layoutWidth) { draw(lastData); }
    }, 100);
  });

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
        lastData = d;
        return draw(d).then(function () {
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
