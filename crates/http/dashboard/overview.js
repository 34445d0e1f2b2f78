// Overview: rates drawn from successive samples of /1/dashboard/stats,
// table sizes and running jobs; refreshed every few seconds.
import { api, esc, fmt, bytes } from './api.js';
import { sparkline } from './charts.js';

export const REFRESH_MS = 3000;
const KEEP = 60;

const CARDS = [
  ['accepted', 'Events accepted / s', 1],
  ['rejected', 'Events rejected / s', 1],
  ['reads', 'Profile reads / s', 1],
  ['latency', 'Profile read latency (ms, mean)', 2],
];

export function mount(root) {
  root.innerHTML = `<h1>Overview</h1>
    <p class="muted">This server's counters, sampled every ${REFRESH_MS / 1000} s; charts show the last ${KEEP} samples.</p>
    <div class="grid">${CARDS.map(([id, title]) => `<section class="card" data-metric="${id}">
      <h2>${title}</h2><div class="metric" id="m-${id}">–</div><div id="c-${id}">${sparkline([], { label: title })}</div></section>`).join('')}</div>
    <div class="cols2" style="margin-top:14px">
      <section class="card reserve"><h2>Rejected events by reason</h2><div id="reasons"><p class="muted">Loading…</p></div></section>
      <section class="card reserve"><h2>Store size per table</h2><div id="tables"><p class="muted">Loading…</p></div></section>
    </div>
    <section class="card reserve" style="margin-top:14px"><h2>Running jobs</h2><div id="jobs"><p class="muted">Loading…</p></div></section>
    <p id="ov-error" class="error" role="alert"></p>`;
  const samples = [];
  let timer = null;
  let stopped = false;

  const rate = (a, b, f) => {
    const dt = (b.at - a.at) / 1000;
    return dt > 0 ? Math.max(0, (f(b) - f(a)) / dt) : null;
  };
  const rejectedTotal = (s) => Object.values(s.eventsRejected).reduce((x, y) => x + y, 0);

  function draw() {
    const series = { accepted: [], rejected: [], reads: [], latency: [] };
    for (let i = 1; i < samples.length; i += 1) {
      const [a, b] = [samples[i - 1], samples[i]];
      series.accepted.push(rate(a, b, (s) => s.eventsAccepted));
      series.rejected.push(rate(a, b, rejectedTotal));
      series.reads.push(rate(a, b, (s) => s.profileReads.count));
      const n = b.profileReads.count - a.profileReads.count;
      series.latency.push(n > 0 ? ((b.profileReads.seconds - a.profileReads.seconds) * 1000) / n : null);
    }
    for (const [id, title, digits] of CARDS) {
      const values = series[id];
      const last = values.length ? values[values.length - 1] : null;
      root.querySelector(`#m-${id}`).textContent = last === null ? '–' : fmt(last, digits);
      root.querySelector(`#c-${id}`).innerHTML = sparkline(values, { label: title });
    }
    const now = samples[samples.length - 1];
    const prev = samples.length > 1 ? samples[samples.length - 2] : null;
    const reasons = Object.entries(now.eventsRejected);
    root.querySelector('#reasons').innerHTML = reasons.length
      ? `<table><thead><tr><th>reason</th><th class="num">total</th><th class="num">per s</th></tr></thead><tbody>${reasons.map(([r, n]) => `<tr data-reason="${esc(r)}"><td><code>${esc(r)}</code></td><td class="num">${fmt(n)}</td><td class="num">${prev ? fmt(rate(prev, now, (s) => s.eventsRejected[r] || 0), 1) : '–'}</td></tr>`).join('')}</tbody></table>`
      : '<p class="muted">No event rejected since the server started.</p>';
    root.querySelector('#tables').innerHTML = `<table><thead><tr><th>table</th><th class="num">size</th></tr></thead><tbody>${now.tables.map((t) => `<tr><td><code>${esc(t.table)}</code></td><td class="num">${bytes(t.bytes)}</td></tr>`).join('')}</tbody></table>
      <p class="muted">Estimated from the store's split points, re-read every 30 s.</p>`;
    root.querySelector('#jobs').innerHTML = now.jobs.length
      ? now.jobs.map((j) => {
        const p = j.progress;
        const share = p.rangesTotal ? p.rangesDone / p.rangesTotal : 0;
        return `<div class="job" data-job="${esc(j.jobID)}"><div class="row"><strong>${esc(j.type)} #${esc(j.jobID)}</strong>
          <span class="muted">${fmt(p.users)} users · ${fmt(p.rowsRead)} rows · ${fmt(p.elapsedSeconds, 1)} s${p.etaSeconds === null ? '' : ` · ${fmt(p.etaSeconds, 1)} s left`}</span></div>
          <div class="progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow="${Math.round(share * 100)}"><span style="width:${share * 100}%"></span></div></div>`;
      }).join('')
      : '<p class="muted">No job running (maintenance runs on the server\'s schedule).</p>';
  }

  async function tick() {
    try {
      const s = await api('/1/dashboard/stats');
      if (stopped) return;
      samples.push(s);
      if (samples.length > KEEP + 1) samples.shift();
      root.querySelector('#ov-error').textContent = '';
      draw();
      root.dataset.samples = samples.length;
    } catch (err) {
      if (!stopped) root.querySelector('#ov-error').textContent = `Cannot read the stats: ${err.message}`;
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  }
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}
