"use strict";
// Sorts a table by the column whose heading is clicked: by each cell's
// data-v number when it has one, else by its text; a second click
// reverses the order.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, column) {
    th.tabIndex = 0;
    th.setAttribute("role", "columnheader");
    var sort = function () {
      var descending = th.getAttribute("aria-sort") !== "descending";
      if (!th.hasAttribute("aria-sort") && !th.classList.contains("n")) descending = false;
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var body = table.tBodies[0];
      var rows = Array.prototype.filter.call(body.rows, function (r) { return r.cells.length === heads.length; });
      var key = function (row) {
        var cell = row.cells[column];
        var v = cell.getAttribute("data-v");
        return v !== null ? parseFloat(v) : cell.textContent.trim().toLowerCase();
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return descending ? -order : order;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sort(); } });
  });
});
