// chainrec explorer: heat map -> time range -> chain graph -> the waits through a frame.
// Everything comes from this server's /api/*, or (a static report, `chainrec report`)
// from the data inlined in the page; nothing from the network.
'use strict';

const $ = (id) => document.getElementById(id);
const ROW_PX = 17;
const PAD = { left: 46, right: 8, top: 6, bottom: 18 };

// The page's state, also read by the browser test.
const S = {
  busy: 0, // requests in flight
  heat: null, // /api/heatmap
  range: null, // {from, to}: ns from the trace start
  sel: null, // {a, b}: cells {col, row} of the selection
  chains: null, // /api/chains
  zoom: [], // path of the zoomed frame (names, root excluded)
  waits: null, // /api/waits
  errors: [], // messages shown to the user
  info: null, // /api/info
  base: null, // {from, to}: the baseline range of the differential view
  baseSel: null, // {a, b}: cells of the baseline selection
  critpath: null, // {tid, from, to, data}: the last critical path drawn
  // The data of a static report (`chainrec report`): info, heatmap, precomputed ranges.
  static: null,
};
const INLINED = document.getElementById('chainrec-data');
if (INLINED) S.static = JSON.parse(INLINED.textContent);
window.explorer = S;

function fmtNs(ns) {
  if (ns >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
  if (ns >= 1e6) return (ns / 1e6).toFixed(2) + ' ms';
  if (ns >= 1e3) return (ns / 1e3).toFixed(1) + ' us';
  return ns + ' ns';
}

function setStatus(msg, isError) {
  const s = $('status');
  s.textContent = msg;
  s.className = isError ? 'error' : '';
  if (isError) S.errors.push(msg);
}

// While the server takes its checkpoints (after the heat map, in the background), say
// how far it is: ranges answer meanwhile, those late in the trace slower.
async function showIndexing(info) {
  const el = $('indexing');
  let cur = info;
  while (cur && cur.indexing && !cur.indexing.done) {
    const pct = cur.events ? Math.floor((100 * cur.indexing.events) / cur.events) : 0;
    el.hidden = false;
    el.textContent = `indexing ${pct} %`;
    el.title = `${cur.checkpoints} checkpoints taken: ranges are answered meanwhile, those late in the trace slower until indexing is done`;
    await new Promise((r) => setTimeout(r, 500));
    try {
      cur = await api('/api/info');
    } catch (e) {
      break;
    }
  }
  const err = cur && cur.indexing && cur.indexing.error;
  el.hidden = !err;
  el.className = err ? 'error' : '';
  el.textContent = err ? 'indexing failed: ' + err : '';
}

// This page's id: the server cancels a graph, waits or critical-path request of this page
// when the page asks for a newer one of the same kind (409), so a new selection does not
// wait behind the old one's work.
const SESSION = Array.from(crypto.getRandomValues(new Uint8Array(8)),
  (b) => b.toString(16).padStart(2, '0')).join('');
const CANCELLABLE = /^\/api\/(chains|waits|critpath)\?/;

// An answer the page no longer wants: a newer request of the same kind replaced it.
class Superseded extends Error {}

async function api(path) {
  if (S.static) return staticApi(path);
  if (CANCELLABLE.test(path)) path += '&session=' + SESSION;
  S.busy++;
  try {
    const r = await fetch(path);
    const j = await r.json();
    if (r.status === 409) throw new Superseded(j.error);
    if (!r.ok) throw new Error(j.error || ('HTTP ' + r.status));
    return j;
  } finally {
    S.busy--;
  }
}

// A static report answers from its inlined data: the default heat map and the
// precomputed ranges (a differential view between two of them computed here, by path).
function staticApi(path) {
  const [route, qs] = path.split('?');
  const q = new URLSearchParams(qs || '');
  const d = S.static;
  if (route === '/api/info') return d.info;
  if (route === '/api/heatmap') {
    if ([...q.keys()].some((k) => k !== 'metric') || (q.get('metric') || 'offcpu') !== 'offcpu') {
      throw new Error('this static report holds the off-CPU heat map of all threads only (chainrec serve filters it)');
    }
    return d.heatmap;
  }
  if (route === '/api/chains') {
    const find = (f, t) => d.ranges.find((r) => r.from_ns === +f && r.to_ns === +t);
    const r = find(q.get('from'), q.get('to'));
    const b = q.has('base_from') ? find(q.get('base_from'), q.get('base_to')) : null;
    if (!r || (q.has('base_from') && !b)) {
      throw new Error('that range is not precomputed in this static report: pick one from the list ' +
        '(chainrec serve computes any range)');
    }
    return b ? withBase(expand(r.chains), expand(b.chains)) : expand(r.chains);
  }
  throw new Error(route + ' is not in a static report (chainrec serve answers it)');
}

// A compact answer (`px=`: one row per frame, the strings in lists) as node objects.
function expand(c) {
  if (c.rows && !c.nodes) {
    c.nodes = c.rows.map((r) => ({ name: c.names[r[0]], parent: r[1], value: r[2], self: r[3],
      level: r[4], kind: c.kinds[r[5]], fill: c.fills[r[6]] }));
  }
  return c;
}

// Each node's path (names joined by ';'), for a flat preorder tree.
function nodePaths(nodes) {
  const paths = [];
  for (const n of nodes) paths.push(n.parent === null ? '' : paths[n.parent] + ';' + n.name);
  return paths;
}

// `c` with the `base` member /api/chains gives for base range `b` (values by path).
function withBase(c, b) {
  const theirs = new Map();
  const bp = nodePaths(b.nodes);
  b.nodes.forEach((n, i) => theirs.set(bp[i], n.value));
  const values = nodePaths(c.nodes).map((p) => theirs.get(p) || 0);
  return Object.assign({}, c, {
    base: { from_ns: b.from_ns, to_ns: b.to_ns, window: b.window, counts: b.counts,
      total_ns: b.nodes[0].value, values },
  });
}

// ---- heat map ----

function geom() {
  const c = $('heatmap');
  const h = S.heat;
  const pw = c.width - PAD.left - PAD.right;
  const ph = c.height - PAD.top - PAD.bottom;
  return { c, h, pw, ph, cw: pw / h.columns, ch: ph / h.rows };
}

// Canvas rectangle of a cell (row 0 at the bottom).
function cellRect(col, row) {
  const g = geom();
  return { x: PAD.left + col * g.cw, y: PAD.top + (g.h.rows - 1 - row) * g.ch, w: g.cw, h: g.ch };
}

// The canvas's drawing area on the screen (inside its border) and its scale: canvas
// pixels per CSS pixel, each way.
function screenBox(c) {
  const b = c.getBoundingClientRect();
  const left = b.left + c.clientLeft;
  const top = b.top + c.clientTop;
  return { left, top, kx: c.width / Math.max(1, c.clientWidth), ky: c.height / Math.max(1, c.clientHeight) };
}

function cellAt(ev) {
  const g = geom();
  const s = screenBox(g.c);
  const x = (ev.clientX - s.left) * s.kx - PAD.left;
  const y = (ev.clientY - s.top) * s.ky - PAD.top;
  if (x < 0 || y < 0 || x >= g.pw || y >= g.ph) return null;
  return { col: Math.floor(x / g.cw), row: g.h.rows - 1 - Math.floor(y / g.ch) };
}

// Client coordinates of a cell's centre (for the browser test).
S.cellClientXY = function (col, row) {
  const s = screenBox($('heatmap'));
  const r = cellRect(col, row);
  return [s.left + (r.x + r.w / 2) / s.kx, s.top + (r.y + r.h / 2) / s.ky];
};

// Nanoseconds from the trace start where a cell begins and ends.
function cellStart(col, row) {
  const h = S.heat;
  return h.col0_ns + col * 1e9 + row * h.bucket_ns;
}
function cellEnd(col, row) {
  const h = S.heat;
  return row === h.rows - 1 ? h.col0_ns + (col + 1) * 1e9 : cellStart(col, row) + h.bucket_ns;
}
const order = (c) => c.col * S.heat.rows + c.row;

// The range of a selection: from its earlier cell's start to its later cell's end,
// clipped to the trace; one cell alone stands for its whole second (a column).
S.rangeOf = function (a, b) {
  let from, to;
  if (a.col === b.col && a.row === b.row) {
    from = cellStart(a.col, 0);
    to = cellEnd(a.col, S.heat.rows - 1);
  } else {
    const [p, q] = order(a) <= order(b) ? [a, b] : [b, a];
    from = cellStart(p.col, p.row);
    to = cellEnd(q.col, q.row);
  }
  from = Math.max(0, from);
  to = Math.min(S.heat.duration_ns, to);
  return { from, to: Math.max(from, to) };
};

// The colour scale is by rank among the distinct values of the non-empty cells (a
// percentile), not by value: on a real trace always-asleep threads put nearly every cell
// close to the maximum, and a value scale (log or linear) paints a uniform wall. Each
// distinct value gets its own step, however many cells share it (threads asleep for a
// whole row make many cells exactly equal); ranks 5 % .. 95 % span the whole scale (the
// lightest and darkest 5 % share its ends), so the values between the 10th and 90th
// percentile span 89 % of it.
function heatRanks(h) {
  const v = [];
  for (const col of h.cells) for (const x of col) if (x > 0) v.push(x);
  v.sort((a, b) => a - b);
  return v.filter((x, i) => i === 0 || x !== v[i - 1]);
}
function firstNotBelow(s, v) {
  let lo = 0;
  let hi = s.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (s[m] < v) lo = m + 1;
    else hi = m;
  }
  return lo;
}
// 0 (no colour) .. 1 (darkest) for a cell's value (for the browser test too).
// A value's place among the distinct values: 0 (smallest) .. 1 (largest).
function rankOf(v) {
  const s = S.heatRanks;
  return s.length === 1 ? 1 : firstNotBelow(s, v) / (s.length - 1);
}
S.intensity = function (v) {
  const s = S.heatRanks;
  if (!s || !s.length || v <= 0) return 0;
  return Math.min(1, Math.max(0.04, (rankOf(v) - 0.05) / 0.9));
};
// The value at a point of the colour scale (the legend's labels).
function valueAt(i) {
  const s = S.heatRanks;
  const q = 0.05 + i * 0.9;
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))];
}

function cellColor(v) {
  if (v <= 0) return null;
  const i = S.intensity(v);
  const r = 255 - Math.round(40 * i);
  const gb = Math.round(235 * (1 - i));
  return `rgb(${r},${gb},${Math.round(gb * 0.6)})`;
}

// The canvas's pixels to its width on the page (its height is fixed by app.css, so a new
// width never moves the rows). Not while a drag is on: its cells are those of the
// geometry it began with (the page's scrollbar appearing under a drag resizes later).
let heatDown = null;
let heatResized = false;
// Columns narrower than this scroll sideways instead (a 3,000 s trace would get 0.5 px per
// second in the page's width); the zoom select sets the width per second outright.
const MIN_COL_PX = 4;

function sizeHeat() {
  const c = $('heatmap');
  if (heatDown) {
    heatResized = true;
    return;
  }
  heatResized = false;
  const box = Math.floor($('heatscroll').clientWidth);
  const cols = S.heat ? S.heat.columns : 0;
  const zoom = +$('heatzoom').value || 0;
  const need = PAD.left + PAD.right + cols * (zoom || MIN_COL_PX);
  const w = Math.max(300, zoom ? need : Math.max(box, need));
  c.style.width = w === box ? '' : w + 'px';
  if (c.width !== w) c.width = w;
}

// Seconds from the trace start as an axis label: whole when whole, else to 10 ms.
function fmtAxis(ns) {
  const s = ns / 1e9;
  return (Math.abs(s - Math.round(s)) < 5e-4 ? Math.round(s).toString() : s.toFixed(2)) + 's';
}

function drawHeat() {
  const c = $('heatmap');
  const g = geom();
  const h = g.h;
  const x = c.getContext('2d');
  x.clearRect(0, 0, c.width, c.height);
  x.fillStyle = '#fff';
  x.fillRect(PAD.left, PAD.top, g.pw, g.ph);
  for (let col = 0; col < h.columns; col++) {
    for (let row = 0; row < h.rows; row++) {
      const f = cellColor(h.cells[col][row]);
      const r = cellRect(col, row);
      // Outside the trace: grey, so that a part-second is not read as a quiet one.
      if (cellEnd(col, row) <= 0 || cellStart(col, row) >= h.duration_ns) x.fillStyle = '#e4e4e4';
      else if (f) x.fillStyle = f;
      else continue;
      x.fillRect(r.x, r.y, Math.ceil(r.w), Math.ceil(r.h));
    }
  }
  const shade = (sel, colour) => {
    const [p, q] = order(sel.a) <= order(sel.b) ? [sel.a, sel.b] : [sel.b, sel.a];
    const single = p.col === q.col && p.row === q.row;
    x.fillStyle = colour;
    for (let col = p.col; col <= q.col; col++) {
      const r0 = single || col > p.col ? 0 : p.row;
      const r1 = single || col < q.col ? h.rows - 1 : q.row;
      const top = cellRect(col, r1);
      const bot = cellRect(col, r0);
      x.fillRect(top.x, top.y, Math.ceil(top.w), bot.y + bot.h - top.y);
    }
  };
  if (S.baseSel) shade(S.baseSel, 'rgba(240,140,0,0.4)');
  if (S.sel) shade(S.sel, 'rgba(40,90,220,0.35)');
  x.fillStyle = '#333';
  x.font = '10px Verdana';
  x.textAlign = 'center';
  const step = Math.max(1, Math.ceil(48 / g.cw));
  // Columns are whole seconds (of the wall clock when the trace has one), as the SVG
  // heat map's; each is labelled at its left edge with where it starts in seconds from
  // the trace start, the one time base of the page (the range, the waits, --window).
  // The trace starts inside column 0 (col0_ns <= 0): its label is the trace start.
  x.textAlign = 'left';
  S.axis = [];
  for (let col = 0; col < h.columns; col += step) {
    const r = cellRect(col, 0);
    const ns = Math.max(0, cellStart(col, 0));
    const text = fmtAxis(ns);
    S.axis.push({ col, ns, text });
    x.fillRect(r.x, c.height - PAD.bottom + 1, 1, 4);
    x.fillText(text, r.x + 2, c.height - 5);
  }
  x.textAlign = 'right';
  x.fillText('0 ms', PAD.left - 3, PAD.top + g.ph);
  x.fillText('500', PAD.left - 3, PAD.top + g.ph / 2 + 4);
  x.fillText('1000', PAD.left - 3, PAD.top + 9);
  const what = h.metric === 'wakeups' ? 'wakeups' : 'off-CPU time';
  const from = h.wall_clock
    ? new Date(h.first_second * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC')
    : `second ${h.first_second}`;
  const lead = (-h.col0_ns / 1e9).toFixed(3);
  $('heatinfo').textContent = `x: one column per whole second from ${from}, labelled with its start in ` +
    `seconds from the trace start (the trace starts ${lead} s into the first; grey: outside the trace); ` +
    `${what} of ${h.selection}; ${h.columns} s x ${h.rows} rows ` +
    `(${h.bucket_ns / 1e6} ms)` + (h.note ? `; ${h.note}` : '');
  drawLegend(h);
}

const heatValue = (h, v) => (h.metric === 'wakeups' ? `${v} wakeups` : fmtNs(v));

// The colour legend: the scale with the cell values at its ends and middle.
function drawLegend(h) {
  const l = $('heatlegend');
  if (!S.heatRanks.length) {
    l.textContent = 'no cell has any ' + (h.metric === 'wakeups' ? 'wakeup' : 'off-CPU time');
    return;
  }
  const stops = [0, 0.25, 0.5, 0.75, 1].map((i) => cellColor(valueAt(i)));
  l.innerHTML = '';
  const add = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text) e.textContent = text;
    if (cls) e.className = cls;
    l.appendChild(e);
    return e;
  };
  add('span', `colour by percentile among the ${S.heatRanks.length} distinct values of the non-empty cells: `);
  add('span', heatValue(h, valueAt(0)), 'lv');
  add('span', '', 'bar').style.background = `linear-gradient(to right, ${stops.join(', ')})`;
  add('span', heatValue(h, valueAt(1)), 'lv');
  add('span', ` (median value ${heatValue(h, valueAt(0.5))}; hover a cell for its own)`);
}

// Hover: the cell's time span and value.
function heatHover(ev) {
  const c = $('heatmap');
  const at = S.heat && cellAt(ev);
  if (!at) {
    c.title = '';
    return;
  }
  const v = S.heat.cells[at.col][at.row];
  const a = Math.max(0, cellStart(at.col, at.row));
  const b = Math.min(S.heat.duration_ns, cellEnd(at.col, at.row));
  c.title = `${(a / 1e9).toFixed(3)} .. ${(b / 1e9).toFixed(3)} s: ${heatValue(S.heat, v)}` +
    (v > 0 ? ` (percentile ${Math.round(100 * rankOf(v))} of the values)` : '');
}

// The header's thread filters (comm regex, tid, pid, cgroup regex): they apply to the
// heat map's rows and to the graph's and the waits' roots alike.
const FILTERS = ['comm', 'tid', 'pid', 'cgroup'];
function addFilters(q) {
  if (S.static) return q;
  for (const k of FILTERS) if ($(k).value.trim()) q.set(k, $(k).value.trim());
  return q;
}

// "group by process": a frame of each waiting thread's process above it (graph and
// waits; `chains --process-frames`).
function addGrouping(q) {
  if (!S.static && $('byprocess').checked) q.set('group', 'process');
  return q;
}

async function loadHeat() {
  const q = addFilters(new URLSearchParams({ metric: $('metric').value }));
  try {
    S.heat = await api('/api/heatmap?' + q);
    S.heatRanks = heatRanks(S.heat);
    sizeHeat();
    drawHeat();
  } catch (e) {
    setStatus('heat map: ' + e.message, true);
  }
}

// A drag selects the range; a shift-drag the baseline of the differential view.
// The canvas is not resized while a drag is on (sizeHeat), so its mousedown and mouseup
// read cells in one geometry.
function hookHeat() {
  const c = $('heatmap');
  let key = 'sel';
  c.addEventListener('mousedown', (ev) => {
    heatDown = S.heat && cellAt(ev);
    key = ev.shiftKey ? 'baseSel' : 'sel';
    if (heatDown) {
      S[key] = { a: heatDown, b: heatDown };
      drawHeat();
    }
  });
  c.addEventListener('mousemove', (ev) => {
    heatHover(ev);
    const at = heatDown && cellAt(ev);
    if (at) {
      S[key] = { a: heatDown, b: at };
      drawHeat();
    }
  });
  window.addEventListener('mouseup', (ev) => {
    if (!heatDown) return;
    const at = cellAt(ev) || S[key].b;
    S[key] = { a: heatDown, b: at };
    heatDown = null;
    if (heatResized) sizeHeat();
    drawHeat();
    const r = S.rangeOf(S[key].a, S[key].b);
    if (key === 'baseSel') selectBase(r.from, r.to);
    else selectRange(r.from, r.to);
  });
}

// ---- chain graph ----

const fmtRange = (r) => `${(r.from / 1e9).toFixed(3)} .. ${(r.to / 1e9).toFixed(3)} s`;

async function selectRange(from, to) {
  S.range = { from, to };
  $('range').textContent = fmtRange(S.range);
  clearWaits();
  await loadChains();
}

// A new range: the waits listed belong to the old one (and an answer still on its way for
// it is dropped: waitsSeq).
let waitsTitle = null;
function clearWaits() {
  waitsSeq++;
  S.waits = null;
  S.critpath = null;
  if (waitsTitle === null) waitsTitle = $('waitstitle').textContent;
  $('waitstitle').textContent = waitsTitle;
  $('waitlist').textContent = '';
}

// The page's state in the URL (#from=..&to=..&base_from=..&base_to=..&frame=..): a reload
// or a shared link opens the same range, baseline and frame.
function saveState() {
  if (S.static || !S.range) return;
  const q = new URLSearchParams({ from: S.range.from, to: S.range.to });
  if (S.base) {
    q.set('base_from', S.base.from);
    q.set('base_to', S.base.to);
  }
  if (S.zoom.length) q.set('frame', S.zoom.join(';'));
  addGrouping(addFilters(q));
  history.replaceState(null, '', '#' + q);
}

async function restoreState() {
  const q = new URLSearchParams(location.hash.slice(1));
  // The filters first: the heat map, the graph and the waits all read them.
  const filtered = FILTERS.filter((k) => q.has(k));
  for (const k of filtered) $(k).value = q.get(k);
  $('byprocess').checked = q.get('group') === 'process';
  if (filtered.length) await loadHeat();
  const num = (k) => (q.has(k) && /^[0-9]+$/.test(q.get(k)) ? +q.get(k) : null);
  const [from, to] = [num('from'), num('to')];
  if (from === null || to === null) return openDefault();
  const [bf, bt] = [num('base_from'), num('base_to')];
  if (bf !== null && bt !== null) {
    S.base = { from: bf, to: bt };
    $('nobase').hidden = false;
    $('baseinfo').hidden = false;
  }
  await selectRange(from, to);
  const frame = q.get('frame');
  if (frame && S.chains) {
    await zoomTo(frame.split(';'));
    await loadWaits(frame);
  } else if (S.chains) {
    await loadWaits('');
  }
}

// Traces up to this many events open on their whole chain graph; longer ones on their
// heaviest second (the whole trace is one click away), so that a page on a big trace
// answers in a second and the server does not hold a whole-trace graph nobody asked for.
const OPEN_WHOLE_MAX_EVENTS = 2000000;

// No range in the URL: open on something to read, the whole trace (or its heaviest second)
// with its longest waits.
async function openDefault() {
  const h = S.heat;
  if (!h || !h.duration_ns) return;
  // (A test stands in for a big trace with a small bound.)
  const bound = window.CHAINREC_OPEN_WHOLE_MAX || OPEN_WHOLE_MAX_EVENTS;
  if (!S.info || S.info.events <= bound) {
    await selectRange(0, h.duration_ns);
  } else {
    let best = -1, sum = 0;
    h.cells.forEach((col, i) => {
      const ns = col.reduce((a, b) => a + b, 0);
      if (ns > sum) [best, sum] = [i, ns];
    });
    if (best < 0) return;
    const a = { col: best, row: 0 };
    S.sel = { a, b: a };
    drawHeat();
    const r = S.rangeOf(a, a);
    await selectRange(r.from, r.to);
    // After the graph's own status line.
    setStatus(`opened on the heaviest second (${fmtRange(r)}, ${fmtNs(sum)} off CPU) of a trace ` +
      `of ${S.info.events} events: "whole trace" for all of it`);
  }
  await loadWaits('');
}

// The baseline range (null: none): the graph is then coloured by how each frame's time
// per second of range changed from the baseline to the selected range.
async function selectBase(from, to) {
  S.base = from === null ? null : { from, to };
  if (!S.base) S.baseSel = null;
  $('nobase').hidden = !S.base;
  $('baseinfo').hidden = !S.base;
  if (S.heat) drawHeat();
  if (!S.range) {
    $('baseinfo').textContent = S.base ? `baseline ${fmtRange(S.base)}: now drag the range to compare` : '';
    return;
  }
  await loadChains();
}

let chainsSeq = 0;
let waitsSeq = 0;

// The graph's width in pixels: the server merges each frame's children narrower than one
// pixel into one "[N frames below a pixel]" frame (their widths summed), so an answer holds
// what the page can draw, not millions of invisible frames.
function flamePx() {
  return Math.max(1, Math.floor($('flame').clientWidth));
}

// `zoom`: the path of the frame to show full width (default none): the server merges below
// a pixel of that frame's width under it.
async function loadChains(zoom) {
  const my = ++chainsSeq;
  const { from, to } = S.range;
  const q = new URLSearchParams({ from, to });
  if (S.base) {
    q.set('base_from', S.base.from);
    q.set('base_to', S.base.to);
  }
  if (!S.static) {
    q.set('px', flamePx());
    if (zoom && zoom.length) q.set('zoom', zoom.join(';'));
  }
  const url = '/api/chains?' + addGrouping(addFilters(q));
  try {
    const c = expand(await api(url));
    // A newer range was asked for meanwhile: its answer is the one to show.
    if (my !== chainsSeq) return;
    // The frames come flat, in preorder, each naming its parent: link them.
    c.nodes.forEach((n, i) => {
      n.children = [];
      n.index = i;
    });
    for (const n of c.nodes) if (n.parent !== null) c.nodes[n.parent].children.push(n);
    c.tree = c.nodes[0];
    S.chains = c;
    S.zoom = zoom && findPath(zoom) ? zoom : [];
    drawFlame();
    showBase();
    saveState();
    setStatus(`${c.counts.roots} waits in the range, ${S.chains.frames - 1} frames` +
      (S.chains.pruned_frames ? `, ${S.chains.pruned_frames} tiny frames left out` : '') +
      (S.chains.merged_frames ? `, ${S.chains.merged_frames} below a pixel merged (${S.chains.remainders} grey frames)` : ''));
  } catch (e) {
    if (e instanceof Superseded) return;
    setStatus('chain graph: ' + e.message, true);
  }
}

function showBase() {
  const b = S.chains && S.chains.base;
  const box = $('baseinfo');
  box.textContent = '';
  if (!b) return;
  box.append(`vs baseline ${fmtRange({ from: b.from_ns, to: b.to_ns })} (${b.counts.roots} waits): per second of range, `);
  box.appendChild(el('span', 'legend-grew', 'red grew'));
  box.append(', ');
  box.appendChild(el('span', 'legend-shrank', 'blue shrank'));
  box.append(' (width: the selected range; frames only in the baseline are not drawn)');
}

// The differential colouring of node `n` (index `i`): its time per second of the
// selected range minus that of the baseline, scaled by the largest such change (the
// root by its own relative change).
function diffOf(i) {
  const c = S.chains;
  const b = c.base;
  if (!b) return null;
  const span = Math.max(1, c.to_ns - c.from_ns) / 1e9;
  const bspan = Math.max(1, b.to_ns - b.from_ns) / 1e9;
  if (c.maxDelta === undefined) {
    c.maxDelta = 0;
    c.nodes.forEach((n, j) => {
      if (j > 0) c.maxDelta = Math.max(c.maxDelta, Math.abs(n.value / span - b.values[j] / bspan));
    });
  }
  const n = c.nodes[i];
  const delta = n.value / span - b.values[i] / bspan;
  // The root (all of it) changes by the sum of every frame's change, beyond the scale of
  // any one frame: it is shaded by its relative change instead (a 10 % drop: light blue).
  const scale = i === 0 ? Math.max(n.value / span, b.values[i] / bspan) : c.maxDelta;
  const k = scale > 0 ? Math.min(1, Math.abs(delta) / scale) : 0;
  const v = Math.round(235 * (1 - k));
  const fill = delta > 0 ? `rgb(255,${v},${v})` : delta < 0 ? `rgb(${v},${v},255)` : 'rgb(235,235,235)';
  return { delta, base: b.values[i], rate: n.value / span, baseRate: b.values[i] / bspan, fill, dark: k > 0.6 };
}

// Show the frame of `path` full width; when frames below it were merged at the whole
// graph's scale, ask again for that frame's scale (a static report cannot: its grey frames
// stay).
async function zoomTo(path) {
  S.zoom = path;
  drawFlame();
  const n = findPath(path);
  if (!n || S.static || S.chains.zoom === path.join(';')) return;
  const merged = (m) => m.kind === 'merged' || m.children.some(merged);
  if (n.children.some(merged)) await loadChains(path);
}

function findPath(path) {
  let n = S.chains.tree;
  for (const name of path) {
    n = n.children.find((c) => c.name === name);
    if (!n) return null;
  }
  return n;
}

// The graph is drawn on a canvas, one rectangle per frame and its name clipped to it
// (16,000 absolutely placed elements took ~0.3 s to build and lay out on a busy range):
// S.drawn lists what is drawn, row by row in x order, for hit-testing (hover, click)
// and for the browser tests; `pathOf` names a frame's path when it is asked for.
const FRAME_H = 16;
const FRAME_FONT = '11px Verdana, sans-serif';
// Labels: a frame wider than this gets its name (clipped with an ellipsis).
const LABEL_MIN_PX = 24;

// A frame's path: its names from the root's child down, joined by ';' (the root: '').
function pathOf(node) {
  const names = [];
  for (let n = node; n && n.parent !== null; n = S.chains.nodes[n.parent]) names.push(n.name);
  return names.reverse().join(';');
}

// Hatched fills (a frame with no stack; lost events), as app.css's repeating gradients.
const hatches = {};
function hatch(ctx, a, b) {
  const key = a + b;
  if (!hatches[key]) {
    const t = document.createElement('canvas');
    t.width = t.height = 8;
    const x = t.getContext('2d');
    for (let i = 0; i < 8; i++) {
      for (let j = 0; j < 8; j++) {
        x.fillStyle = (((i - j) % 8) + 8) % 8 < 4 ? a : b;
        x.fillRect(i, j, 1, 1);
      }
    }
    hatches[key] = t;
  }
  return ctx.createPattern(hatches[key], 'repeat');
}

// `text` cut to fit `px` (an ellipsis where cut), as CSS's text-overflow draws it.
function fitText(ctx, text, px, widths) {
  let full = widths.get(text);
  if (full === undefined) {
    full = ctx.measureText(text).width;
    widths.set(text, full);
  }
  if (full <= px) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const m = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, m) + '\u2026').width <= px) lo = m;
    else hi = m - 1;
  }
  return lo ? text.slice(0, lo) + '\u2026' : '';
}

function flameCanvas() {
  const box = $('flame');
  let cv = box.querySelector('canvas');
  if (!cv) {
    cv = document.createElement('canvas');
    cv.id = 'flamecanvas';
    const hover = document.createElement('div');
    hover.id = 'flamehover';
    hover.hidden = true;
    box.append(cv, hover);
  }
  return cv;
}

function drawFlame() {
  const box = $('flame');
  const cv = flameCanvas();
  S.drawn = [];
  S.rows = [];
  $('flamehover').hidden = true;
  if (!S.chains) {
    cv.width = cv.height = 0;
    return;
  }
  const W = box.clientWidth;
  const re = searchRegex();
  let depth = 0;
  let maxDepth = 0;
  const add = (node, x, w, d) => {
    const diff = diffOf(node.index);
    const f = { node, x, w, d, fill: diff ? diff.fill : node.fill || 'rgb(220,220,220)', diff,
      match: !!(re && node.kind !== 'root' && re.test(node.name)) };
    S.drawn.push(f);
    (S.rows[d] || (S.rows[d] = [])).push(f);
    maxDepth = Math.max(maxDepth, d);
  };
  // The zoomed frame's ancestors full width, then its subtree to scale.
  let node = S.chains.tree;
  add(node, 0, W, depth);
  let found = 0;
  for (const name of S.zoom) {
    node = node.children.find((c) => c.name === name);
    if (!node) break;
    depth++;
    found++;
    add(node, 0, W, depth);
  }
  // The zoomed frame's name in bold.
  const zoomed = S.zoom.length && found === S.zoom.length ? node : null;
  const scale = W / Math.max(1, node.value);
  const walk = (n, x, d) => {
    let cx = x;
    for (const c of n.children) {
      const w = c.value * scale;
      add(c, cx, w, d);
      walk(c, cx, d + 1);
      cx += w;
    }
  };
  walk(node, 0, depth + 1);
  const H = (maxDepth + 1) * ROW_PX + 4;
  box.style.height = H + 'px';
  const dpr = window.devicePixelRatio || 1;
  cv.style.width = W + 'px';
  cv.style.height = H + 'px';
  cv.width = Math.round(W * dpr);
  cv.height = Math.round(H * dpr);
  const ctx = cv.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, H);
  // Each frame on whole pixels as its element was (its edges rounded), its right and
  // bottom pixel white (the border); a frame under 3 px has no white right pixel, so that
  // runs of frames a pixel or two wide read as their colours, not as white.
  const marker = hatch(ctx, '#bebebe', '#fafafa');
  const lost = hatch(ctx, '#e62828', '#ffebeb');
  const labels = [];
  for (const f of S.drawn) {
    const y = f.d * ROW_PX;
    if (f.match) ctx.fillStyle = 'rgb(230,0,230)';
    else if (f.diff) ctx.fillStyle = f.fill;
    else if (f.fill.startsWith('url(#chainrec-marker')) ctx.fillStyle = marker;
    else if (f.fill.startsWith('url(#chainrec-lost')) ctx.fillStyle = lost;
    else ctx.fillStyle = f.fill;
    const x0 = Math.round(f.x);
    const px = Math.round(f.x + f.w) - x0;
    if (px > 0) ctx.fillRect(x0, y, px >= 3 ? px - 1 : px, FRAME_H - 1);
    if (f.w > LABEL_MIN_PX) labels.push(f);
  }
  // The names: 2 px in, clipped at the frame's right border.
  ctx.textBaseline = 'middle';
  const widths = new Map();
  for (const style of ['', 'italic ', 'bold ']) {
    ctx.font = style + FRAME_FONT;
    widths.clear();
    for (const f of labels) {
      const n = f.node;
      const merged = n.kind === 'merged' && !f.diff;
      const s = f.node === zoomed ? 'bold ' : merged ? 'italic ' : '';
      if (s !== style) continue;
      const text = fitText(ctx, frameName(n), f.w - 3, widths);
      if (!text) continue;
      ctx.fillStyle = f.match || (f.diff && f.diff.dark) ? '#fff' : merged ? '#555' : '#222';
      ctx.fillText(text, f.x + 2, f.d * ROW_PX + FRAME_H / 2);
    }
  }
  showMatched(re);
}

// The frame drawn at (x, y) of the graph's canvas (CSS pixels), or null.
function frameAt(x, y) {
  const d = Math.floor(y / ROW_PX);
  const row = S.rows && S.rows[d];
  if (!row || y - d * ROW_PX >= FRAME_H) return null;
  let lo = 0;
  let hi = row.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (row[m].x + row[m].w <= x) lo = m + 1;
    else hi = m;
  }
  const f = row[lo];
  return f && f.x <= x && f.w >= 1 ? f : null;
}

// The frames drawn as plain values (for the browser tests): path, place on the screen,
// weights, fill and marks.
S.frames = function () {
  const b = $('flamecanvas').getBoundingClientRect();
  return S.drawn.map((f) => ({
    path: pathOf(f.node),
    x: b.left + f.x,
    y: b.top + f.d * ROW_PX,
    w: f.w,
    value: f.node.value,
    self: f.node.self,
    root: f.node.kind === 'root',
    merged: f.node.kind === 'merged',
    match: f.match,
    fill: f.match ? 'rgb(230,0,230)' : f.fill,
    base: f.diff ? f.diff.base : null,
    delta: f.diff ? f.diff.delta : null,
  }));
};

function frameName(node) {
  return node.kind === 'root' ? `all (${S.chains.counts.roots} waits)` : node.name;
}

// A frame's tooltip, made when the mouse reaches it (not for every frame drawn).
function frameTitle(node) {
  const diff = diffOf(node.index);
  const total = S.chains.tree.value || 1;
  return `${frameName(node)}\n${fmtNs(node.value)} (${(100 * node.value / total).toFixed(2)}%)` +
    (node.self ? `, ${fmtNs(node.self)} ending here` : '') + (node.level ? `\nlevel ${node.level}` : '') +
    (diff ? `\n${fmtNs(diff.rate)} per s here, ${fmtNs(diff.baseRate)} per s in the baseline` : '');
}

function searchRegex() {
  const s = $('search').value;
  if (!s) return null;
  try {
    return new RegExp(s);
  } catch (e) {
    setStatus('search: ' + e.message, true);
    return null;
  }
}

function showMatched(re) {
  if (!re || !S.chains) {
    $('matched').textContent = '';
    return;
  }
  // Time of matching frames, each path counted once (not again below a match).
  let sum = 0;
  const walk = (n) => {
    for (const c of n.children) {
      if (re.test(c.name)) sum += c.value;
      else walk(c);
    }
  };
  walk(S.chains.tree);
  const total = S.chains.tree.value || 1;
  $('matched').textContent = `matched ${fmtNs(sum)} (${(100 * sum / total).toFixed(2)}%)`;
}

function hookFlame() {
  // The frame under the mouse: outlined, its tooltip, the pointer.
  const under = (ev) => {
    const cv = $('flamecanvas');
    if (!cv || !S.chains) return null;
    const b = cv.getBoundingClientRect();
    return frameAt(ev.clientX - b.left, ev.clientY - b.top);
  };
  let hovered = null;
  $('flame').addEventListener('mousemove', (ev) => {
    const f = under(ev);
    if (f === hovered) return;
    hovered = f;
    const cv = $('flamecanvas');
    const o = $('flamehover');
    o.hidden = !f;
    cv.style.cursor = f ? 'pointer' : '';
    cv.title = f ? frameTitle(f.node) : '';
    if (f) Object.assign(o.style, { left: f.x + 'px', top: f.d * ROW_PX + 'px', width: f.w + 'px' });
  });
  $('flame').addEventListener('mouseleave', () => {
    hovered = null;
    $('flamehover').hidden = true;
  });
  $('flame').addEventListener('click', (ev) => {
    const f = under(ev);
    if (!f) return;
    if (f.node.kind === 'root') {
      S.zoom = [];
      drawFlame();
      return;
    }
    let path = pathOf(f.node).split(';');
    // A grey "[N frames below a pixel]" frame: its parent, at whose scale they show.
    if (f.node.kind === 'merged') path = path.slice(0, -1);
    if (!path.length) return;
    zoomTo(path);
    saveState();
    if (S.static) {
      $('waitstitle').textContent = 'The waits through a frame are not in a static report: chainrec serve lists them.';
    } else {
      loadWaits(path.join(';'));
    }
  });
  $('search').addEventListener('input', () => drawFlame());
  $('reset').addEventListener('click', () => {
    S.zoom = [];
    drawFlame();
    saveState();
  });
  // Keys: Esc clears the search and the zoom; / goes to the search box.
  document.addEventListener('keydown', (ev) => {
    const typing = ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement.tagName);
    if (ev.key === 'Escape') {
      if (typing) document.activeElement.blur();
      $('search').value = '';
      S.zoom = [];
      drawFlame();
      saveState();
    } else if (ev.key === '/' && !typing) {
      ev.preventDefault();
      $('search').focus();
    }
  });
}

// ---- waits ----

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function loadWaits(path) {
  const r = S.range || { from: 0, to: S.heat.duration_ns };
  const q = addGrouping(addFilters(new URLSearchParams({ frame: path, from: r.from, to: r.to, limit: 10 })));
  const list = $('waitlist');
  const my = ++waitsSeq;
  try {
    const w = await api('/api/waits?' + q);
    if (my !== waitsSeq) return; // another frame or range was picked meanwhile
    S.waits = w;
  } catch (e) {
    if (!(e instanceof Superseded)) setStatus('waits: ' + e.message, true);
    return;
  }
  const w = S.waits;
  const name = path.split(';').pop();
  $('waitstitle').textContent = path === ''
    ? `${w.matched_waits} waits in this range (${fmtNs(w.matched_ns)}); the ` +
      `${w.waits.length} longest (click a frame for the waits through it):`
    : `${w.matched_waits} waits pass through ${name} ` +
      `(${fmtNs(w.matched_ns)}); the ${w.waits.length} longest through it:`;
  list.textContent = '';
  for (const { through_ns, wait } of w.waits) {
    const d = el('div', 'wait');
    d.dataset.tid = wait.tid;
    d.dataset.through = through_ns;
    d.appendChild(el('div', 'head',
      `${wait.comm} (tid ${wait.tid}) at ${wait.time_s.toFixed(6)} s: ${waitSummary(wait)}` +
      (path === '' ? '' : `; ${fmtNs(through_ns)} through this frame`)));
    const ol = el('ol');
    ol.start = 0;
    const root = el('li', '', `level 0: ${wait.comm} waits` +
      (wait.kframes && wait.kframes.length ? ` in ${wait.kframes[0]}` : ''));
    addParts(root, wait, 0);
    ol.appendChild(root);
    for (const hop of wait.hops) {
      const who = hop.metal ? hop.node : `${hop.waker_comm} (tid ${hop.waker_tid})`;
      const parent = hop.parent != null ? hop.parent : hop.level - 1;
      const what = hop.kind === 'earlier wait'
        ? `an earlier wait of level ${parent}'s waker` + (hop.waits > 1 ? ` (${hop.waits} alike)` : '')
        : hop.kind === 'blocked: not followed'
          ? `level ${parent}'s waker blocked, not followed`
          : `${who} woke level ${parent} [${hop.context}]`;
      const li = el('li', hop.metal ? 'metal' : hop.kind ? 'branch' : '',
        `level ${hop.level}: ${what}, ${fmtNs(hop.ns)}`);
      if (hop.kframes && hop.kframes.length) {
        li.appendChild(el('span', 'stack', ' in ' + hop.kframes.slice(0, 3).join(' < ')));
      }
      if (!hop.metal && !hop.kind) addParts(li, wait, hop.level);
      ol.appendChild(li);
    }
    d.appendChild(ol);
    const btn = el('button', 'cpbtn', 'critical path around it');
    btn.addEventListener('click', () => loadCritpath(wait, d));
    d.firstChild.appendChild(btn);
    list.appendChild(d);
  }
}

// The whole wait in one line: blocked (the state it blocked in) or preempted, then
// runnable until it ran.
function waitSummary(w) {
  const parts = [];
  if (w.state_str === 'R') parts.push('preempted');
  else parts.push(`blocked ${w.blocked_ns != null ? fmtNs(w.blocked_ns) : '?'} [${w.state_str}]`);
  if (w.runq_ns != null) parts.push(`runnable ${fmtNs(w.runq_ns)}`);
  if (w.offcpu_ns != null) parts.push(`off-CPU ${fmtNs(w.offcpu_ns)} in all`);
  return parts.join(', ');
}

// Under a level: what its time was made of. Level 0: its runnable part (behind whom);
// a waker level: runnable (behind whom), blocked in earlier waits (its branches), and on
// CPU (the sampled stack, or none), so that no part of a level reads as something else.
function addParts(li, w, level) {
  const by = (xs) => xs.reduce((a, x) => a + x.ns, 0);
  const runq = (w.runq || []).filter((p) => p.level === level).sort((a, b) => b.ns - a.ns);
  const parts = [];
  if (runq.length) {
    parts.push(`runnable ${fmtNs(by(runq))} behind ` +
      runq.slice(0, 3).map((p) => `${p.holder} ${fmtNs(p.ns)}`).join(', ') +
      (runq.length > 3 ? `, ${runq.length - 3} others` : ''));
  }
  if (level > 0) {
    const branches = w.hops.filter((h) => h.kind && h.parent === level);
    if (branches.length) {
      const n = branches.reduce((a, h) => a + (h.waits || 1), 0);
      parts.push(`blocked ${fmtNs(by(branches))} in ${n} earlier wait${n > 1 ? 's' : ''}`);
    }
    const oncpu = (w.oncpu || []).filter((p) => p.level === level).sort((a, b) => b.ns - a.ns);
    if (oncpu.length) {
      const top = oncpu[0];
      const frame = (top.uframes && top.uframes[0]) || (top.kframes && top.kframes[0]);
      parts.push(`on CPU ${fmtNs(by(oncpu))}` + (frame ? ` (mostly in ${frame})` : ` ${top.node}`));
    }
  }
  if (parts.length) li.appendChild(el('div', 'parts', 'of it: ' + parts.join('; ')));
}

// The waiting thread's critical path from its switch-out minus a margin to its
// switch-in plus the margin (half the wait, 1 ms .. 1 s), drawn under the wait.
async function loadCritpath(wait, box) {
  const start = S.info.start_ns;
  const end = wait.switch_in_ns != null ? wait.switch_in_ns : start + S.info.duration_ns;
  const margin = Math.min(1e9, Math.max(1e6, Math.round((end - wait.switch_out_ns) / 2)));
  const from = Math.max(0, wait.switch_out_ns - start - margin);
  const to = Math.min(S.info.duration_ns, end - start + margin);
  let cp;
  try {
    cp = await api(`/api/critpath?tid=${wait.tid}&from=${from}&to=${to}`);
  } catch (e) {
    if (!(e instanceof Superseded)) setStatus('critical path: ' + e.message, true);
    return;
  }
  S.critpath = { tid: wait.tid, from, to, data: cp };
  const old = box.querySelector('.cp');
  if (old) old.remove();
  const div = el('div', 'cp');
  div.appendChild(el('div', '', `critical path of ${cp.comm} (tid ${cp.tid}) over ${fmtNs(cp.wall_ns)}: ` +
    `running ${fmtNs(cp.running_ns)}, runnable ${fmtNs(cp.runnable_ns)}, blocked ${fmtNs(cp.blocked_ns)}` +
    (cp.unknown_ns ? `, unknown ${fmtNs(cp.unknown_ns)}` : '') + ' (the wait outlined)'));
  const bar = el('div', 'cpbar');
  const wall = Math.max(1, cp.wall_ns);
  const isWait = (s) => s.kind !== 'running' && s.start_ns <= wait.switch_out_ns && wait.switch_out_ns < s.end_ns;
  for (const s of cp.segments) {
    const seg = el('div', s.kind + (isWait(s) ? ' thewait' : ''));
    seg.style.left = (100 * (s.start_ns - cp.start_ns) / wall) + '%';
    seg.style.width = Math.max(0.1, 100 * s.ns / wall) + '%';
    seg.title = `${s.kind} ${fmtNs(s.ns)}: ${segmentWhy(s)}`;
    bar.appendChild(seg);
  }
  div.appendChild(bar);
  const ol = el('ol');
  const shown = cp.segments.slice(0, 40);
  for (const s of shown) {
    const li = el('li', '', `+${fmtNs(s.start_ns - cp.start_ns)} ${s.kind} ${fmtNs(s.ns)}: ${segmentWhy(s)}`);
    if (isWait(s)) li.style.fontWeight = 'bold';
    ol.appendChild(li);
  }
  if (cp.segments.length > shown.length) ol.appendChild(el('li', '', `... ${cp.segments.length - shown.length} more segments`));
  div.appendChild(ol);
  box.appendChild(div);
}

function segmentWhy(s) {
  const top = (shares, key) => {
    const best = [...shares].sort((a, b) => b.ns - a.ns)[0];
    if (!best) return '';
    return key === 'holder' ? best.holder : best.frames[best.frames.length - 1];
  };
  switch (s.kind) {
    case 'running':
      return s.stacks.length ? 'in ' + top(s.stacks, 'frames') : 'on CPU';
    case 'runnable':
      return (s.preempted ? 'preempted, ' : 'woken, ') + 'behind ' + (top(s.behind, 'holder') || '?');
    case 'blocked': {
      const chain = s.levels.map((l) => l.name).join(' <- ');
      const where = s.stack.length ? ' in ' + s.stack[s.stack.length - 1] : '';
      return `[${s.state}]${where}` + (chain ? ' <- ' + chain : s.note ? ' ' + s.note : '');
    }
    default:
      return s.reason || '';
  }
}

// ---- start ----

// A static report: say what it can and cannot do, list its precomputed ranges.
function setupStatic() {
  const d = S.static;
  const banner = $('static');
  banner.hidden = false;
  banner.textContent = `Static report (chainrec report): opens from disk with no server and no network. ` +
    `It can show the heat map, the chain graph of the whole trace and of the ${d.ranges.length - 1} heaviest ` +
    'seconds (pick one from the list, or click its heat-map column), zoom, search, and compare two of them ' +
    '(shift-click a precomputed column for the baseline). It cannot compute other ranges, filter the heat map, ' +
    'list the waits through a frame or draw critical paths: chainrec serve TRACE does all of that.';
  for (const k of ['metric', 'comm', 'tid', 'pid', 'cgroup', 'byprocess']) $(k).disabled = true;
  const sel = $('ranges');
  sel.hidden = false;
  d.ranges.forEach((r, i) => sel.appendChild(Object.assign(el('option', '', r.label), { value: i })));
  sel.addEventListener('change', () => {
    const r = d.ranges[+sel.value];
    S.sel = null;
    drawHeat();
    selectRange(r.from_ns, r.to_ns);
  });
}

async function start() {
  hookHeat();
  hookFlame();
  $('metric').addEventListener('change', loadHeat);
  // A new zoom keeps the second in the middle of the view where it was.
  $('heatzoom').addEventListener('change', () => {
    if (!S.heat) return;
    const box = $('heatscroll');
    const mid = (box.scrollLeft + box.clientWidth / 2) / Math.max(1, box.scrollWidth);
    sizeHeat();
    drawHeat();
    box.scrollLeft = mid * box.scrollWidth - box.clientWidth / 2;
  });
  // Grouping redraws the selected range's graph and its waits.
  $('byprocess').addEventListener('change', async () => {
    if (!S.range) return;
    await selectRange(S.range.from, S.range.to);
    if (S.chains) await loadWaits('');
  });
  // A filter redraws the heat map and the selected range's graph and waits under it.
  for (const k of FILTERS) {
    $(k).addEventListener('change', async () => {
      await loadHeat();
      if (S.range) {
        await selectRange(S.range.from, S.range.to);
        if (S.chains) await loadWaits('');
      }
    });
  }
  $('nobase').addEventListener('click', () => selectBase(null, null));
  $('whole').addEventListener('click', () => {
    S.sel = null;
    drawHeat();
    selectRange(0, S.heat.duration_ns);
  });
  window.addEventListener('resize', () => {
    if (S.heat) {
      sizeHeat();
      drawHeat();
    }
    drawFlame();
  });
  // The canvas's width also changes without a window resize (a scrollbar when the graph
  // makes the page scroll, where scrollbar-gutter is not supported).
  if (window.ResizeObserver) {
    new ResizeObserver(() => {
      const c = $('heatmap');
      if (S.heat && !heatDown && c.width !== Math.max(300, Math.floor(c.clientWidth))) {
        sizeHeat();
        drawHeat();
      }
    }).observe($('heatmap'));
  }
  try {
    const info = await api('/api/info');
    S.info = info;
    $('cgroupbox').hidden = !info.cgroups;
    $('trace').textContent = `${info.trace}: ${info.events} events, ${fmtNs(info.duration_ns)}`;
    document.title = 'chainrec: ' + info.trace;
    if (!S.static) showIndexing(info);
  } catch (e) {
    setStatus('info: ' + e.message, true);
  }
  if (S.static) setupStatic();
  await loadHeat();
  if (S.static) await selectRange(0, S.info.duration_ns);
  else await restoreState();
}

start();
