// Live drawing of the operator graph (inline SVG) from the operator and stream rows of the application form.
// Layout: each operator's column is its longest distance from a source; edges to unknown operators are listed.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var box = document.getElementById("dag");
  if (!box) { return; }
  var summary = document.getElementById("dag-summary");
  var datalist = document.getElementById("operator-names");

  function rowValues(prefix, names) {
    var out = [];
    document.querySelectorAll(".rowset[data-prefix='" + prefix + "'] .rows > [data-row]").forEach(function (row) {
      var item = {};
      names.forEach(function (n) {
        var el = row.querySelector("[name$='-" + n + "']");
        item[n] = el ? el.value.trim() : "";
      });
      out.push(item);
    });
    return out;
  }

  function el(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function layers(names, edges) {
    var layer = {};
    names.forEach(function (n) { layer[n] = 0; });
    for (var pass = 0; pass < names.length; pass++) {  // longest path; stops after n passes on a cycle
      var changed = false;
      edges.forEach(function (e) {
        if (layer[e[1]] < layer[e[0]] + 1) { layer[e[1]] = layer[e[0]] + 1; changed = true; }
      });
      if (!changed) { return { layer: layer, cycle: false }; }
    }
    return { layer: layer, cycle: edges.length > 0 };
  }

  function draw() {
    var ops = rowValues("operators", ["name", "kind"]).filter(function (o) { return o.name; });
    var kinds = {};
    ops.forEach(function (o) { if (!(o.name in kinds)) { kinds[o.name] = o.kind || "operator"; } });
    var names = Object.keys(kinds);
    if (datalist) {
      datalist.innerHTML = "";
      names.forEach(function (n) { var opt = document.createElement("option"); opt.value = n; datalist.appendChild(opt); });
    }
    var edges = [], unknown = [];
    rowValues("streams", ["source", "target"]).forEach(function (s) {
      if (!s.source && !s.target) { return; }
      if (s.source in kinds && s.target in kinds) { edges.push([s.source, s.target]); }
      else { unknown.push((s.source || "?") + " → " + (s.target || "?")); }
    });
    var laid = layers(names, edges);
    var columns = {};
    names.forEach(function (n) { (columns[laid.layer[n]] = columns[laid.layer[n]] || []).push(n); });
    var nCols = Object.keys(columns).length ? Math.max.apply(null, Object.keys(columns).map(Number)) + 1 : 0;
    var nRows = 0;
    Object.keys(columns).forEach(function (c) { nRows = Math.max(nRows, columns[c].length); });
    var W = 130, H = 34, GX = 50, GY = 18, PAD = 10;
    // left to right when that fits the box; top to bottom otherwise (a long chain in a narrow column would be
    // scaled down to a few pixels' height): each layer is then a row, its operators side by side
    var wide = PAD * 2 + nCols * W + Math.max(0, nCols - 1) * GX;
    var vertical = nCols > 1 && wide > (box.clientWidth || 600) - 20;
    box.classList.toggle("vertical", vertical);
    var GV = 30;  // vertical gap between layers (room for the arrows)
    var width = vertical ? Math.max(200, PAD * 2 + nRows * W + Math.max(0, nRows - 1) * GY)
                         : Math.max(200, wide);
    var height = vertical ? Math.max(60, PAD * 2 + nCols * H + Math.max(0, nCols - 1) * GV)
                          : Math.max(60, PAD * 2 + nRows * H + Math.max(0, nRows - 1) * GY);
    var svg = el("svg", { viewBox: "0 0 " + width + " " + height, width: width, height: height, "aria-hidden": "true" });
    var defs = el("defs", {});
    var marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.appendChild(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#57606a" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
    var pos = {};
    Object.keys(columns).forEach(function (c) {
      var col = columns[c];
      if (vertical) {
        var left = (width - (col.length * W + (col.length - 1) * GY)) / 2;
        col.forEach(function (n, i) { pos[n] = { x: left + i * (W + GY), y: PAD + Number(c) * (H + GV) }; });
      } else {
        var top = (height - (col.length * H + (col.length - 1) * GY)) / 2;
        col.forEach(function (n, i) { pos[n] = { x: PAD + Number(c) * (W + GX), y: top + i * (H + GY) }; });
      }
    });
    edges.forEach(function (e) {
      var a = pos[e[0]], b = pos[e[1]], x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      if (vertical) {
        var back2 = b.y <= a.y + H;
        var dv = back2
          ? "M " + (a.x + W) + " " + (a.y + H / 2) + " C " + width + " " + (a.y + H / 2) + ", " + width + " " + (b.y + H / 2) + ", " + (b.x + W) + " " + (b.y + H / 2)
          : "M " + (a.x + W / 2) + " " + (a.y + H) + " C " + (a.x + W / 2) + " " + (a.y + H + GV / 2) + ", " + (b.x + W / 2) + " " + (b.y - GV / 2) + ", " + (b.x + W / 2) + " " + b.y;
        svg.appendChild(el("path", { d: dv, "class": "edge" + (back2 ? " bad" : ""), "marker-end": "url(#arrow)" }));
        return;
      }
      var back = x2 <= x1;
      var d = back ? "M " + (a.x + W / 2) + " " + (a.y + H) + " C " + (a.x + W / 2) + " " + (height) + ", " + (b.x + W / 2) + " " + height + ", " + (b.x + W / 2) + " " + (b.y + H)
                   : "M " + x1 + " " + y1 + " C " + (x1 + GX / 2) + " " + y1 + ", " + (x2 - GX / 2) + " " + y2 + ", " + x2 + " " + y2;
      svg.appendChild(el("path", { d: d, "class": "edge" + (back ? " bad" : ""), "marker-end": "url(#arrow)" }));
    });
    names.forEach(function (n) {
      var g = el("g", { "class": "node " + kinds[n], "data-name": n });
      g.appendChild(el("rect", { x: pos[n].x, y: pos[n].y, width: W, height: H, rx: 6 }));
      var label = n.length > 16 ? n.slice(0, 15) + "…" : n;
      g.appendChild(el("text", { x: pos[n].x + W / 2, y: pos[n].y + H / 2 + 4, "text-anchor": "middle" }, label));
      g.appendChild(el("title", {}, n + " (" + kinds[n] + ")"));
      svg.appendChild(g);
    });
    box.innerHTML = "";
    box.appendChild(svg);
    var parts = [names.length + " operator" + (names.length === 1 ? "" : "s"), edges.length + " stream" + (edges.length === 1 ? "" : "s")];
    if (laid.cycle) { parts.push("the streams form a cycle"); }
    if (unknown.length) { parts.push("not drawn (unknown operator): " + unknown.join(", ")); }
    summary.textContent = parts.join("; ") + ".";
    box.setAttribute("aria-label", "operator graph: " + edges.map(function (e) { return e[0] + " to " + e[1]; }).join(", "));
  }
  document.addEventListener("input", function (e) { if (e.target.closest(".rowset")) { draw(); } });
  document.addEventListener("change", function (e) { if (e.target.closest(".rowset")) { draw(); } });
  document.addEventListener("rows-changed", draw);
  var lastWidth = box.clientWidth;
  window.addEventListener("resize", function () {
    if (box.clientWidth !== lastWidth) { lastWidth = box.clientWidth; draw(); }
  });
  draw();
})();
