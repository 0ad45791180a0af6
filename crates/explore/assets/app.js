// chainrec explorer: heat map -> time range -> chain graph -> the waits through a frame.
// Everything comes from this server's /api/*; nothing from the network.
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
};
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

async function api(path) {
  S.busy++;
  try {
    const r = await fetch(path);
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || ('HTTP ' + r.status));
    return j;
  } finally {
    S.busy--;
  }
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

function cellAt(ev) {
  const g = geom();
  const b = g.c.getBoundingClientRect();
  const x = (ev.clientX - b.left) * (g.c.width / b.width) - PAD.left;
  const y = (ev.clientY - b.top) * (g.c.height / b.height) - PAD.top;
  if (x < 0 || y < 0 || x >= g.pw || y >= g.ph) return null;
  return { col: Math.floor(x / g.cw), row: g.h.rows - 1 - Math.floor(y / g.ch) };
}

// Client coordinates of a cell's centre (for the browser test).
S.cellClientXY = function (col, row) {
  const c = $('heatmap');
  const b = c.getBoundingClientRect();
  const r = cellRect(col, row);
  const k = b.width / c.width;
  return [b.left + (r.x + r.w / 2) * k, b.top + (r.y + r.h / 2) * k];
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

function cellColor(v, max) {
  if (v <= 0) return null;
  const i = Math.log1p(v) / Math.log1p(max);
  const r = 255 - Math.round(40 * i);
  const gb = Math.round(235 * (1 - i));
  return `rgb(${r},${gb},${Math.round(gb * 0.6)})`;
}

function drawHeat() {
  const c = $('heatmap');
  c.width = Math.max(300, Math.floor(c.clientWidth));
  const g = geom();
  const h = g.h;
  const x = c.getContext('2d');
  x.clearRect(0, 0, c.width, c.height);
  x.fillStyle = '#fff';
  x.fillRect(PAD.left, PAD.top, g.pw, g.ph);
  for (let col = 0; col < h.columns; col++) {
    for (let row = 0; row < h.rows; row++) {
      const f = cellColor(h.cells[col][row], h.max);
      const r = cellRect(col, row);
      // Outside the trace: grey, so that a part-second is not read as a quiet one.
      if (cellEnd(col, row) <= 0 || cellStart(col, row) >= h.duration_ns) x.fillStyle = '#e4e4e4';
      else if (f) x.fillStyle = f;
      else continue;
      x.fillRect(r.x, r.y, Math.ceil(r.w), Math.ceil(r.h));
    }
  }
  if (S.sel) {
    const [p, q] = order(S.sel.a) <= order(S.sel.b) ? [S.sel.a, S.sel.b] : [S.sel.b, S.sel.a];
    const single = p.col === q.col && p.row === q.row;
    x.fillStyle = 'rgba(40,90,220,0.35)';
    for (let col = p.col; col <= q.col; col++) {
      const r0 = single || col > p.col ? 0 : p.row;
      const r1 = single || col < q.col ? h.rows - 1 : q.row;
      const top = cellRect(col, r1);
      const bot = cellRect(col, r0);
      x.fillRect(top.x, top.y, Math.ceil(top.w), bot.y + bot.h - top.y);
    }
  }
  x.fillStyle = '#333';
  x.font = '10px Verdana';
  x.textAlign = 'center';
  const step = Math.max(1, Math.ceil(40 / g.cw));
  for (let col = 0; col < h.columns; col += step) {
    const r = cellRect(col, 0);
    const t = (h.col0_ns + col * 1e9) / 1e9;
    x.fillText(t.toFixed(0) + 's', r.x + r.w / 2, c.height - 5);
  }
  x.textAlign = 'right';
  x.fillText('0 ms', PAD.left - 3, PAD.top + g.ph);
  x.fillText('500', PAD.left - 3, PAD.top + g.ph / 2 + 4);
  x.fillText('1000', PAD.left - 3, PAD.top + 9);
  const what = h.metric === 'wakeups' ? 'wakeups' : 'off-CPU time';
  $('heatinfo').textContent = `${what} of ${h.selection}; ${h.columns} s x ${h.rows} rows ` +
    `(${h.bucket_ns / 1e6} ms); darkest cell ${h.metric === 'wakeups' ? h.max : fmtNs(h.max)}` +
    (h.note ? `; ${h.note}` : '');
}

async function loadHeat() {
  const q = new URLSearchParams({ metric: $('metric').value });
  if ($('comm').value) q.set('comm', $('comm').value);
  try {
    S.heat = await api('/api/heatmap?' + q);
    drawHeat();
  } catch (e) {
    setStatus('heat map: ' + e.message, true);
  }
}

function hookHeat() {
  const c = $('heatmap');
  let down = null;
  c.addEventListener('mousedown', (ev) => {
    down = cellAt(ev);
    if (down) {
      S.sel = { a: down, b: down };
      drawHeat();
    }
  });
  c.addEventListener('mousemove', (ev) => {
    const at = down && cellAt(ev);
    if (at) {
      S.sel = { a: down, b: at };
      drawHeat();
    }
  });
  window.addEventListener('mouseup', (ev) => {
    if (!down) return;
    const at = cellAt(ev) || S.sel.b;
    S.sel = { a: down, b: at };
    down = null;
    drawHeat();
    const r = S.rangeOf(S.sel.a, S.sel.b);
    selectRange(r.from, r.to);
  });
}

// ---- chain graph ----

async function selectRange(from, to) {
  S.range = { from, to };
  $('range').textContent = `${(from / 1e9).toFixed(3)} .. ${(to / 1e9).toFixed(3)} s`;
  try {
    const c = await api(`/api/chains?from=${from}&to=${to}`);
    // The frames come flat, in preorder, each naming its parent: link them.
    for (const n of c.nodes) n.children = [];
    for (const n of c.nodes) if (n.parent !== null) c.nodes[n.parent].children.push(n);
    c.tree = c.nodes[0];
    S.chains = c;
    S.zoom = [];
    drawFlame();
    setStatus(`${c.counts.roots} waits in the range, ${S.chains.frames - 1} frames` +
      (S.chains.pruned_frames ? `, ${S.chains.pruned_frames} tiny frames left out` : ''));
  } catch (e) {
    setStatus('chain graph: ' + e.message, true);
  }
}

function findPath(path) {
  let n = S.chains.tree;
  for (const name of path) {
    n = n.children.find((c) => c.name === name);
    if (!n) return null;
  }
  return n;
}

function drawFlame() {
  const box = $('flame');
  box.textContent = '';
  if (!S.chains) return;
  const W = box.clientWidth;
  const re = searchRegex();
  let depth = 0;
  let maxDepth = 0;
  const frag = document.createDocumentFragment();
  const add = (node, path, x, w, d) => {
    const div = document.createElement('div');
    div.className = 'f';
    const fill = node.fill || 'rgb(220,220,220)';
    if (fill.startsWith('url(#chainrec-marker')) div.classList.add('marker');
    else if (fill.startsWith('url(#chainrec-lost')) div.classList.add('lost');
    else div.style.background = fill;
    if (re && node.kind !== 'root' && re.test(node.name)) div.classList.add('match');
    div.style.left = x + 'px';
    div.style.width = w + 'px';
    div.style.top = d * ROW_PX + 'px';
    const name = node.kind === 'root' ? `all (${S.chains.counts.roots} waits)` : node.name;
    if (w > 24) div.textContent = name;
    const total = S.chains.tree.value || 1;
    div.title = `${name}\n${fmtNs(node.value)} (${(100 * node.value / total).toFixed(2)}%)` +
      (node.self ? `, ${fmtNs(node.self)} ending here` : '') + (node.level ? `\nlevel ${node.level}` : '');
    div.dataset.path = path.join(';');
    div.dataset.value = node.value;
    div.dataset.self = node.self;
    div.dataset.root = node.kind === 'root' ? '1' : '';
    frag.appendChild(div);
    maxDepth = Math.max(maxDepth, d);
  };
  // The zoomed frame's ancestors full width, then its subtree to scale.
  let node = S.chains.tree;
  const path = [];
  add(node, path, 0, W, depth);
  for (const name of S.zoom) {
    node = node.children.find((c) => c.name === name);
    if (!node) break;
    path.push(name);
    depth++;
    add(node, path.slice(), 0, W, depth);
  }
  const scale = W / Math.max(1, node.value);
  const walk = (n, p, x, d) => {
    let cx = x;
    for (const c of n.children) {
      const w = c.value * scale;
      const cp = p.concat([c.name]);
      add(c, cp, cx, w, d);
      walk(c, cp, cx, d + 1);
      cx += w;
    }
  };
  walk(node, path, 0, depth + 1);
  box.style.height = (maxDepth + 1) * ROW_PX + 4 + 'px';
  box.appendChild(frag);
  if (S.zoom.length) {
    const z = box.querySelector(`.f[data-path="${CSS.escape(S.zoom.join(';'))}"]`);
    if (z) z.classList.add('zoomed');
  }
  showMatched(re);
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
  $('flame').addEventListener('click', (ev) => {
    const f = ev.target.closest('.f');
    if (!f) return;
    if (f.dataset.root) {
      S.zoom = [];
      drawFlame();
      return;
    }
    S.zoom = f.dataset.path.split(';');
    drawFlame();
    loadWaits(f.dataset.path);
  });
  $('search').addEventListener('input', () => drawFlame());
  $('reset').addEventListener('click', () => {
    S.zoom = [];
    drawFlame();
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
  const q = new URLSearchParams({ frame: path, from: r.from, to: r.to, limit: 10 });
  const list = $('waitlist');
  try {
    S.waits = await api('/api/waits?' + q);
  } catch (e) {
    setStatus('waits: ' + e.message, true);
    return;
  }
  const w = S.waits;
  const name = path.split(';').pop();
  $('waitstitle').textContent = `${w.matched_waits} waits pass through ${name} ` +
    `(${fmtNs(w.matched_ns)}); the ${w.waits.length} longest through it:`;
  list.textContent = '';
  for (const { through_ns, wait } of w.waits) {
    const d = el('div', 'wait');
    d.dataset.tid = wait.tid;
    d.dataset.through = through_ns;
    const blocked = wait.blocked_ns != null ? fmtNs(wait.blocked_ns) : '?';
    d.appendChild(el('div', 'head',
      `${wait.comm} (tid ${wait.tid}) at ${wait.time_s.toFixed(6)} s: blocked ${blocked} [${wait.state_str}], ` +
      `${fmtNs(through_ns)} through this frame`));
    const ol = el('ol');
    ol.start = 0;
    ol.appendChild(el('li', '', `level 0: ${wait.comm} waits` +
      (wait.kframes && wait.kframes.length ? ` in ${wait.kframes[0]}` : '')));
    for (const hop of wait.hops) {
      const who = hop.metal ? hop.node : `${hop.waker_comm} (tid ${hop.waker_tid})`;
      const li = el('li', hop.metal ? 'metal' : '', `level ${hop.level}: ${who} woke it [${hop.context}], ${fmtNs(hop.ns)}`);
      if (hop.kframes && hop.kframes.length) {
        li.appendChild(el('span', 'stack', ' in ' + hop.kframes.slice(0, 3).join(' < ')));
      }
      ol.appendChild(li);
    }
    d.appendChild(ol);
    list.appendChild(d);
  }
}

// ---- start ----

async function start() {
  hookHeat();
  hookFlame();
  $('metric').addEventListener('change', loadHeat);
  $('comm').addEventListener('change', loadHeat);
  $('whole').addEventListener('click', () => {
    S.sel = null;
    drawHeat();
    selectRange(0, S.heat.duration_ns);
  });
  window.addEventListener('resize', () => {
    if (S.heat) drawHeat();
    drawFlame();
  });
  try {
    const info = await api('/api/info');
    $('trace').textContent = `${info.trace}: ${info.events} events, ${fmtNs(info.duration_ns)}`;
    document.title = 'chainrec: ' + info.trace;
  } catch (e) {
    setStatus('info: ' + e.message, true);
  }
  await loadHeat();
}

start();
