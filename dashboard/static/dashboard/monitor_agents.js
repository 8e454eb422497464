/* Agent inspector: heatmap of the learned greedy action per deployment x rate level, learning curves. */
(function () {
  "use strict";
  var node = document.getElementById("agent-charts");
  if (!node || !window.Plotly) { return; }
  var charts = JSON.parse(node.textContent);
  var cfg = {responsive: true, displaylogo: false};
  document.querySelectorAll(".heatmap").forEach(function (el) {
    var m = charts[el.dataset.operator].map;
    var text = m.action.map(function (row, i) {
      return row.map(function (a, j) {
        var v = m.value[i][j];
        return m.names[a] + (v === null ? "" : " (est. cost " + v.toFixed(4) + ")");
      });
    });
    var levels = m.levels.map(function (lo) { return Math.round(lo) + "–" + Math.round(lo + m.level_width); });
    Plotly.newPlot(el, [{
      type: "heatmap", z: m.delta, x: levels, y: m.labels, text: text, zmin: -1, zmax: 1,
      colorscale: [[0, "#2166ac"], [0.5, "#f7f7f7"], [1, "#b2182b"]],
      colorbar: {title: {text: "replicas"}, tickvals: [-1, 0, 1], ticktext: ["remove", "keep", "add"]},
      hovertemplate: "deployment %{y}<br>rate %{x} tuples/s<br>%{text}<extra></extra>"
    }], {
      title: {text: "Learned policy of " + el.dataset.operator + " (" + m.policy + ", " + m.steps +
                    " steps): best action per deployment × input-rate level"},
      xaxis: {title: {text: "input-rate level (tuples/s)"}}, yaxis: {title: {text: "deployment"}, type: "category"},
      margin: {l: 110, r: 20, t: 50, b: 60}, height: Math.max(300, 60 + 22 * m.labels.length)
    }, cfg);
  });
  document.querySelectorAll(".curve").forEach(function (el) {
    var c = charts[el.dataset.operator].curve;
    Plotly.newPlot(el, [{type: "scatter", mode: "lines", x: c.x, y: c.y, name: "cumulative average cost",
                         line: {color: "#0b5cad"}}], {
      title: {text: "Learning curve of " + el.dataset.operator + ": cumulative average cost per period"},
      xaxis: {type: "date", title: {text: "time (UTC)"}},
      yaxis: {title: {text: "weighted cost per period (0–1)"}, rangemode: "tozero"},
      margin: {l: 70, r: 20, t: 50, b: 50}, height: 300
    }, cfg);
  });
}());
