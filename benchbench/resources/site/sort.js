// benchbench leaderboard: click a column header to sort (numbers numerically, blanks last)
document.addEventListener('DOMContentLoaded', function () {
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('th').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-dir') !== 'asc';
        table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
          if (x === '' && y === '') return 0;
          if (x === '') return 1;
          if (y === '') return -1;
          var nx = parseFloat(x), ny = parseFloat(y);
          var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
});
