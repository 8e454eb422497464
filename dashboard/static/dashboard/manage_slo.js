// Plain-language reading of the SLO fields, updated as the user types (same sentences as the server renders).
(function () {
  "use strict";
  var out = document.getElementById("slo-help");
  if (!out) { return; }
  function num(id) {
    var el = document.getElementById(id);
    if (!el || el.value.trim() === "") { return null; }
    var v = Number(el.value);
    return isFinite(v) ? v : null;
  }
  function fmt(v) { return String(Number(v.toPrecision(6))); }
  function update() {
    var r = num("id_r_max_ms"), v = num("id_eta_v"), rr = num("id_eta_r"), period = num("id_om_period_s") || 60;
    var bound = r !== null ? "R_max = " + fmt(r) + " ms" : "R_max";
    var lines = [];
    if (v !== null && v >= 0 && v < 1) {
      lines.push(bound + " may be exceeded at most " + fmt(v * 100) + "% of the time (at most " +
        Math.round(v * 86400 / period) + " of the " + Math.round(86400 / period) + " control periods of " +
        fmt(period) + " s in a day).");
    } else {
      lines.push(bound + ": give η_V in [0, 1) to see how often it may be exceeded.");
    }
    if (rr !== null && rr >= 0 && rr < 1) {
      lines.push("The deployment may be changed in at most " + fmt(rr * 100) + "% of the control periods.");
    }
    out.innerHTML = "";
    lines.forEach(function (t) { var p = document.createElement("p"); p.textContent = t; out.appendChild(p); });
  }
  ["id_r_max_ms", "id_eta_v", "id_eta_r", "id_om_period_s"].forEach(function (id) {
    var el = document.getElementById(id);
    if (el) { el.addEventListener("input", update); }
  });
})();
