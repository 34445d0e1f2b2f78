// Key visualizer: per table, reads and writes per key range (rows) over
// time slots (columns), brighter for more; a hot row key is a bright band.
import { api, url, esc, fmt, ApiError } from './api.js';
import { heatColor } from './charts.js';

const SLOTS = 120;

export function mount(root) {
  root.innerHTML = `<h1>Key visualizer</h1>
  <div class="card row"><label>Show <select id="kv-mode"><option value="both">reads + writes</option><option value="reads">reads</option><option value="writes">writes</option></select></label>
    <span class="legend">fewer <span class="ramp"></span> more (log scale, per table)</span>
    <span class="muted" id="kv-info"></span></div>
  <div id="kv-tables" class="stack" style="margin-top:14px"><section class="card reserve"><p class="muted">Loading…</p></section></div>
  <p id="kv-error" class="error" role="alert"></p>`;
  const $ = (s) => root.querySelector(s);
  let stopped = false;
  let timer = null;
  let last = null;
  const ctl = new AbortController();

  const value = (slot, i) => {
    const mode = $('#kv-mode').value;
    return (mode === 'writes' ? 0 : slot.reads[i]) + (mode === 'reads' ? 0 : slot.writes[i]);
  };
  const rangeOf = (slot, i) => [i === 0 ? '' : slot.bounds[i - 1], i < slot.bounds.length ? slot.bounds[i] : ''];
  const label = ([from, to]) => `[${from === '' ? 'start' : from}, ${to === '' ? 'end' : to})`;

  function table(t) {
    const slots = t.slots;
    const W = 10, H = 256;
    const x0 = Math.max(0, SLOTS - slots.length);
    let max = 0;
    for (const s of slots) for (let i = 0; i < s.reads.length; i += 1) max = Math.max(max, value(s, i));
    const scale = Math.log1p(max || 1);
    let cells = '';
    slots.forEach((s, col) => {
      const n = s.reads.length;
      for (let i = 0; i < n; i += 1) {
        const v = value(s, i);
        const [from, to] = rangeOf(s, i);
        const y = (H * i) / n;
        cells += `<rect x="${(x0 + col) * W}" y="${y.toFixed(2)}" width="${W}" height="${(H / n + 0.05).toFixed(2)}" fill="${heatColor(v ? Math.log1p(v) / scale : 0)}"`
          + ` data-slot="${col}" data-range="${i}" data-value="${v}" data-from="${esc(from)}" data-to="${esc(to)}">`
          + `<title>${esc(s.end)}  ${esc(label([from, to]))}: ${fmt(s.reads[i])} reads, ${fmt(s.writes[i])} writes</title></rect>`;
      }
    });
    const latest = slots[slots.length - 1];
    let hottest = slots.length ? '' : `<p class="muted">Counting started; the first slot ends within ${esc(String(last.slotSeconds))} s.</p>`;
    if (latest) {
      const order = latest.reads.map((_, i) => i).sort((a, b) => value(latest, b) - value(latest, a)).slice(0, 3)
        .filter((i) => value(latest, i) > 0);
      hottest = order.length ? `<table class="hottest"><thead><tr><th>hottest ranges in the last slot</th><th class="num">reads</th><th class="num">writes</th></tr></thead><tbody>${order.map((i) => {
        const [from, to] = rangeOf(latest, i);
        return `<tr data-from="${esc(from)}" data-to="${esc(to)}"><td><code>${esc(label([from, to]))}</code></td><td class="num">${fmt(latest.reads[i])}</td><td class="num">${fmt(latest.writes[i])}</td></tr>`;
      }).join('')}</tbody></table>` : '<p class="muted">No read or write in the last slot.</p>';
    }
    const axis = latest ? [0, 0.25, 0.5, 0.75].map((f) => {
      const n = latest.reads.length;
      const i = Math.floor(f * n);
      return `<div style="position:absolute;top:${(100 * i) / n}%;left:4px" class="mono">${esc(rangeOf(latest, i)[0] || 'start')}</div>`;
    }).join('') : '';
    return `<section class="card" data-table="${esc(t.table)}"><h2><code>${esc(t.table)}</code></h2>
      <div style="position:relative;overflow:hidden"><svg class="heat" viewBox="0 0 ${SLOTS * W} ${H}" preserveAspectRatio="none" role="img" aria-label="Heatmap of ${esc(t.table)}">${cells}</svg>
      <div style="position:absolute;inset:0;pointer-events:none;color:#e2e8f0;font-size:11px;text-shadow:0 0 3px #000">${axis}</div></div>
      <p class="muted">Rows: key ranges (top: start of the table); columns: slots, newest at the right.</p>${hottest}</section>`;
  }

  function draw() {
    if (!last) return;
    const since = last.tables.length ? new Date(last.tables[0].sinceMillis).toLocaleTimeString() : '';
    $('#kv-info').textContent = `slots of ${last.slotSeconds} s; ranges re-cut each slot from sampled keys; `
      + `counting since ${since} (this page started it), until a day after the page was last open`;
    $('#kv-tables').innerHTML = last.tables.map(table).join('');
    root.dataset.slots = String(Math.max(0, ...last.tables.map((t) => t.slots.length)));
  }

  async function tick() {
    let every = 5;
    try {
      last = await api(url('/1/dashboard/keyvis', { slots: SLOTS }), { signal: ctl.signal });
      every = Math.max(1, last.slotSeconds);
      $('#kv-error').textContent = '';
      draw();
    } catch (err) {
      if (err.name === 'AbortError') return;
      $('#kv-error').textContent = err instanceof ApiError && err.status === 404 ? err.message : `Cannot read the counters: ${err.message}`;
    }
    if (!stopped) timer = setTimeout(tick, every * 1000);
  }
  $('#kv-mode').addEventListener('change', draw);
  tick();
  return () => { stopped = true; clearTimeout(timer); ctl.abort(); };
}
