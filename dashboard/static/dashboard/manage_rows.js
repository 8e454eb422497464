// Add and remove rows of Django formsets (operators, streams, node types...). A row's fields are named
// "<prefix>-<i>-<field>"; removing a row renumbers the rest and the management form's TOTAL_FORMS.
(function () {
  "use strict";
  function renumber(set) {
    var prefix = set.dataset.prefix;
    var rows = set.querySelectorAll(".rows > [data-row]");
    var pattern = new RegExp("^(id_)?" + prefix + "-(\\d+|__prefix__)-");
    rows.forEach(function (row, i) {
      row.querySelectorAll("[name],[id],[for],[aria-describedby]").forEach(function (el) {
        ["name", "id", "for"].forEach(function (attr) {
          var v = el.getAttribute(attr);
          if (v && pattern.test(v)) { el.setAttribute(attr, v.replace(pattern, "$1" + prefix + "-" + i + "-")); }
        });
        var d = el.getAttribute("aria-describedby");
        if (d) {
          el.setAttribute("aria-describedby", d.split(" ").map(function (x) {
            return x.replace(pattern, "$1" + prefix + "-" + i + "-");
          }).join(" "));
        }
      });
    });
    set.querySelector("input[name='" + prefix + "-TOTAL_FORMS']").value = rows.length;
    document.dispatchEvent(new CustomEvent("rows-changed", { detail: { prefix: prefix } }));
  }
  function init(set) {
    var template = set.querySelector("template");
    set.querySelector(".add-row").addEventListener("click", function () {
      var fragment = template.content.cloneNode(true);
      var row = fragment.querySelector("[data-row]");
      set.querySelector(".rows").appendChild(fragment);
      renumber(set);
      var first = row.querySelector("input,select");
      if (first) { first.focus(); }
    });
    set.addEventListener("click", function (event) {
      var button = event.target.closest(".remove-row");
      if (!button) { return; }
      button.closest("[data-row]").remove();
      renumber(set);
    });
  }
  document.querySelectorAll(".rowset").forEach(init);
})();
