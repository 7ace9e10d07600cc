"""``report.html``: the sweep's report as one self-contained page, opened in any browser with no
network: sortable, filterable tables (the summary and every point), the mean accuracy-vs-recall
curves of each model with each point's grid value on hover, and a per-target view (its
trajectories, and the derivation that survives at its superficial points drawn as a graph).

Drawn with plotly.js, inlined (about 4.8 MB of the page; the tables are a few lines of plain
JavaScript). The data is one JSON block (:mod:`.html_data`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none;position:sticky;top:0}
th[aria-sort=ascending]::after{content:' \\25B2'}th[aria-sort=descending]::after{content:' \\25BC'}
td.text,th.text{text-align:left}.scroll{max-height:28em;overflow:auto}
.filter{margin:.3em 0;padding:.3em;width:22em}.note{color:#666;font-size:.9em}
.plots{display:flex;flex-wrap:wrap;gap:1em}.plot{width:560px;height:440px}
.graph{width:100%;height:520px}select{padding:.2em;margin:.2em .5em .2em 0}
"""

_JS = r"""
(function(){
const D = JSON.parse(document.getElementById('report-data').textContent);
const COLORS = ['#1f77b4','#ff7f0e','#2ca02c','#d62728','#9467bd','#8c564b','#e377c2','#7f7f7f','#bcbd22','#17becf'];
function color(method){ const base = method.split('@')[0]; let i = D.methods.indexOf(method);
  if (i < 0) i = D.methods.indexOf(base); if (i < 0) i = D.methods.length; return COLORS[i % COLORS.length]; }
function fmt(v){ if (v === null || v === undefined) return ''; if (typeof v === 'number' && !Number.isInteger(v)) return v.toFixed(3); return String(v); }

function table(id, data){
  const host = document.getElementById(id);
  const filter = document.createElement('input');
  filter.className = 'filter'; filter.type = 'search'; filter.placeholder = 'filter rows (e.g. a method, a relation)';
  filter.id = id + '-filter';
  const wrap = document.createElement('div'); wrap.className = 'scroll';
  const t = document.createElement('table'); t.id = id + '-table';
  const head = t.createTHead().insertRow();
  const numeric = data.columns.map((c, j) => data.rows.every(r => r[j] === null || typeof r[j] === 'number'));
  data.columns.forEach((c, j) => { const th = document.createElement('th'); th.textContent = c; th.dataset.col = c;
    if (!numeric[j]) th.className = 'text'; th.addEventListener('click', () => sort(j, th)); head.appendChild(th); });
  const body = t.createTBody();
  data.rows.forEach(r => { const tr = body.insertRow(); r.forEach((v, j) => { const td = tr.insertCell();
    td.textContent = fmt(v); if (!numeric[j]) td.className = 'text'; }); tr._row = r; });
  function sort(j, th){
    const asc = th.getAttribute('aria-sort') !== 'ascending';
    head.querySelectorAll('th').forEach(h => h.removeAttribute('aria-sort'));
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    const rows = Array.from(body.rows);
    rows.sort((a, b) => { const x = a._row[j], y = b._row[j];
      if (x === y) return 0; if (x === null) return 1; if (y === null) return -1;
      const c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
      return asc ? c : -c; });
    rows.forEach(r => body.appendChild(r));
  }
  filter.addEventListener('input', () => { const q = filter.value.trim().toLowerCase();
    Array.from(body.rows).forEach(r => { r.hidden = q !== '' && !r.textContent.toLowerCase().includes(q); }); });
  host.appendChild(filter); wrap.appendChild(t); host.appendChild(wrap);
}

const AXES = {xaxis: {title: {text: 'recall of the minimal set (higher: more forgotten)'}, range: [-0.02, 1.02]},
              yaxis: {title: {text: 'accuracy on the other known facts'}, range: [-0.02, 1.02]},
              margin: {l: 60, r: 10, t: 40, b: 50}, legend: {orientation: 'h', y: -0.2}, hovermode: 'closest'};
const HOVER = '%{fullData.name}<br>grid value %{customdata[0]}<br>recall %{x:.3f}<br>accuracy %{y:.3f}%{customdata[1]}<extra></extra>';

function curves(){
  const host = document.getElementById('curves');
  Object.entries(D.curves).forEach(([model, per]) => {
    const div = document.createElement('div'); div.className = 'plot curve'; host.appendChild(div);
    const traces = Object.entries(per).map(([method, pts]) => ({type: 'scatter', mode: 'lines+markers', name: method,
      x: pts.map(p => p.recall), y: pts.map(p => p.accuracy), line: {color: color(method)},
      customdata: pts.map(p => [p.param, '<br>targets ' + p.n]), hovertemplate: HOVER}));
    Plotly.newPlot(div, traces, Object.assign({title: {text: model + ': mean over targets', x: 0.02, xanchor: 'left'}}, AXES),
                   {responsive: true, displaylogo: false});
  });
  if (!Object.keys(D.curves).length) host.textContent = 'No point was evaluated.';
}

function targetView(){
  const sel = document.getElementById('target-select');
  D.targets.forEach((t, i) => { const o = document.createElement('option'); o.value = i;
    o.textContent = t.id + ' ' + t.fact + (t.derivations.length ? '  [superficial]' : ''); sel.appendChild(o); });
  const dsel = document.getElementById('derivation-select');
  function show(){
    const t = D.targets[+sel.value]; if (!t) return;
    const traces = Object.entries(t.trajectories).map(([key, pts]) => ({type: 'scatter', mode: 'lines+markers',
      name: key, x: pts.map(p => p[1]), y: pts.map(p => p[2]), line: {color: color(key.split(' ').slice(-1)[0])},
      marker: {symbol: pts.map(p => p[3] ? 'circle' : (p[4] ? 'x' : 'circle-open')), size: 9},
      customdata: pts.map(p => [p[0], p[3] ? '<br>deep' : (p[4] ? '<br>superficial' : '<br>target answered')]),
      hovertemplate: HOVER}));
    Plotly.react('target-curve', traces, Object.assign({title: {text: 'target ' + t.id, x: 0.02, xanchor: 'left'}}, AXES),
                 {responsive: true, displaylogo: false});
    dsel.innerHTML = '';
    t.derivations.forEach((d, i) => { const o = document.createElement('option'); o.value = i; o.textContent = d.label;
      dsel.appendChild(o); });
    document.getElementById('target-notes').textContent = t.notes.join('; ');
    drawGraph();
  }
  function drawGraph(){
    const t = D.targets[+sel.value]; const d = t && t.derivations[+dsel.value];
    const box = document.getElementById('derivation'), msg = document.getElementById('derivation-msg');
    msg.textContent = !d && t && !t.notes.length ?
      'No derivation survives: at every point where the target is no longer answered, it is deep.' : '';
    box.hidden = !d;
    if (!d) { Plotly.purge(box); return; }
    const g = d.graph, ex = [], ey = [], xs = g.nodes.map(n => n.x), ys = g.nodes.map(n => n.y);
    g.edges.forEach(([a, b]) => { ex.push(g.nodes[a].x, g.nodes[b].x, null); ey.push(g.nodes[a].y, g.nodes[b].y, null); });
    const KIND = {target: ['#d62728', 'target (no longer answered)'], derived: ['#ff7f0e', 'derived by the rules'],
                  known: ['#1f77b4', 'fact the model still knows'], rule: ['#7f7f7f', 'rule']};
    const traces = [{type: 'scatter', mode: 'lines', x: ex, y: ey, line: {color: '#999', width: 1.5},
                     hoverinfo: 'skip', showlegend: false}];
    Object.entries(KIND).forEach(([kind, [col, name]]) => { const ns = g.nodes.filter(n => n.kind === kind);
      if (!ns.length) return;
      traces.push({type: 'scatter', mode: 'markers+text', name: name, x: ns.map(n => n.x), y: ns.map(n => n.y),
        text: ns.map(n => n.label + (n.repeated ? ' (above)' : '')), textposition: kind === 'rule' ? 'middle right' : 'top center',
        marker: {color: col, size: kind === 'rule' ? 9 : 15, symbol: kind === 'rule' ? 'diamond' : 'circle'},
        hovertext: ns.map(n => kind === 'rule' ? n.datalog : n.label + ' [' + n.fact + ']'), hoverinfo: 'text'}); });
    Plotly.react(box, traces, {title: {text: 'surviving derivation: ' + d.label, x: 0.02, xanchor: 'left'}, hovermode: 'closest',
      xaxis: {visible: false, range: [Math.min(...xs) - 0.9, Math.max(...xs) + 0.9]},
      yaxis: {visible: false, range: [Math.min(...ys) - 0.4, 0.4]}, margin: {l: 20, r: 20, t: 40, b: 20},
      legend: {orientation: 'h'}}, {responsive: true, displaylogo: false});
  }
  sel.addEventListener('change', show); dsel.addEventListener('change', drawGraph);
  if (D.targets.length) { const first = D.targets.findIndex(t => t.derivations.length); sel.value = Math.max(first, 0); show(); }
}

table('summary', D.summary); table('points', D.points); curves(); targetView();
document.body.dataset.ready = '1';
})();
"""


def html_page(data: Mapping[str, Any]) -> str:
    """The page: the CSS, the data block, plotly.js and the script, in one string."""
    from plotly.offline import get_plotlyjs

    from ..metrics import json_safe

    blob = json.dumps(json_safe(data), ensure_ascii=False, allow_nan=False, default=str).replace("</", "<\\/")
    title = _escape(str(data.get("title", "report")))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{title}</title>",
        f"<style>{_CSS}</style>", "</head><body>",
        f"<h1>{title}</h1>",
        f'<p class="note">Generated {_escape(str(data.get("generated", "")))}. The same sweep as report.md, '
        "interactive: click a column to sort, type to filter, hover a point for its grid value.</p>",
        "<h2>Summary</h2>", '<div id="summary"></div>',
        "<h2>Accuracy against recall</h2>",
        '<p class="note">Each method\'s points averaged over the targets that ran them, one per grid value '
        "(paper Figure 4).</p>", '<div id="curves" class="plots"></div>',
        "<h2>Per target</h2>",
        '<p class="note">A target\'s trajectories (filled: deep; x: the target forgotten but still derivable, '
        "superficial; open: the target still answered) and, at each method's superficial point with the best "
        "accuracy, the derivation that survives in what the model still knows.</p>",
        '<label>target <select id="target-select"></select></label>',
        '<div id="target-curve" class="plot"></div>',
        '<label>derivation <select id="derivation-select"></select></label>',
        '<p id="target-notes" class="note"></p>', '<p id="derivation-msg" class="note"></p>',
        '<div id="derivation" class="graph"></div>',
        "<h2>Points</h2>", '<div id="points"></div>',
        f'<script type="application/json" id="report-data">{blob}</script>',
        f"<script>{get_plotlyjs()}</script>", f"<script>{_JS}</script>",
        "</body></html>", ""])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def write_html(path: Path, data: Mapping[str, Any]) -> None:
    Path(path).write_text(html_page(data), encoding="utf-8")
