/* Agent inspector: heatmap of the learned greedy action per deployment x rate level, learning curves. */
(function () {
  "use strict";
  var node = document.getElementById("agent-charts");
  if (!node || !window.Plotly) { return; }
  var charts = JSON.parse(node.textContent);
  var cfg = {responsive: true, displaylogo: false};
  function narrow(el) { return (el.clientWidth || 1000) < 600; }
  function heatmap(el) {
    var m = charts[el.dataset.operator].map, small = narrow(el);
    var text = m.action.map(function (row, i) {
      return row.map(function (a, j) {
        var v = m.value[i][j];
        return m.names[a] + (v === null ? "" : " (est. cost " + v.toFixed(4) + ")");
      });
    });
    var levels = m.levels.map(function (lo) { return Math.round(lo) + "–" + Math.round(lo + m.level_width); });
    var title = "Learned policy of " + el.dataset.operator + " (" + m.policy + ", " + m.steps + " steps):" +
      (small ? "<br>" : " ") + "best action per deployment × input-rate level";
    return Plotly.react(el, [{
      type: "heatmap", z: m.delta, x: levels, y: m.labels, text: text, zmin: -1, zmax: 1,
      colorscale: [[0, "#2166ac"], [0.5, "#f7f7f7"], [1, "#b2182b"]],
      colorbar: {title: {text: small ? "" : "replicas"}, tickvals: [-1, 0, 1], thickness: small ? 8 : 20,
                 tickfont: {size: small ? 10 : 12}, xpad: small ? 4 : 10,
                 ticktext: small ? ["−1", "0", "+1"] : ["remove", "keep", "add"]},
      hovertemplate: "deployment %{y}<br>rate %{x} tuples/s<br>%{text}<extra></extra>"
    }], {
      title: {text: title, font: {size: small ? 12 : 14}, x: 0, xanchor: "left", xref: "container", pad: {l: 8}},
      // automargin: the rotated rate levels and the deployments' labels get the room they need (not clipped)
      xaxis: {title: {text: "input-rate level (tuples/s)", standoff: 6}, automargin: true,
              nticks: small ? 6 : 20, tickangle: -45, ticklabelstandoff: 4},
      yaxis: {title: {text: small ? "" : "deployment", standoff: 6}, type: "category", automargin: true,
              tickfont: {size: small ? 10 : 12}},
      margin: {l: small ? 4 : 10, r: small ? 4 : 10, t: small ? 56 : 40, b: 10},
      height: Math.max(small ? 320 : 300, 140 + 18 * m.labels.length)
    }, cfg);
  }
  function curve(el) {
    var c = charts[el.dataset.operator].curve;
    return Plotly.react(el, [{type: "scatter", mode: "lines", x: c.x, y: c.y, name: "cumulative average cost",
                         line: {color: "#0b5cad"}}], {
      title: {text: "Learning curve of " + el.dataset.operator + ":" + (narrow(el) ? "<br>" : " ") +
                    "cumulative average cost per period", font: {size: narrow(el) ? 12 : 14},
              x: 0, xanchor: "left", xref: "container", pad: {l: 8}},
      xaxis: {type: "date", title: {text: "time (UTC)", standoff: 6}, automargin: true, nticks: narrow(el) ? 4 : 10,
              ticklabelstandoff: 8},  // the first date clear of the y axis's 0
      yaxis: {title: {text: narrow(el) ? "cost (0–1)" : "weighted cost per period (0–1)"}, rangemode: "tozero",
              automargin: true},
      margin: {l: 10, r: 10, t: narrow(el) ? 56 : 40, b: 10}, height: 300
    }, cfg);
  }
  function drawAll() {
    document.querySelectorAll(".heatmap").forEach(heatmap);
    document.querySelectorAll(".curve").forEach(curve);
  }
  drawAll();
  // titles, labels and the colour bar change below 600 px: draw again when the width crosses it
  var first = document.querySelector(".heatmap, .curve"), wasNarrow = first && narrow(first), timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      if (first && narrow(first) !== wasNarrow) { wasNarrow = !wasNarrow; drawAll(); }
    }, 100);
  });
}());
