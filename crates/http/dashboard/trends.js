// Regional trends: a plain equirectangular map (no tiles: a graticule and
// the areas), an area grid shaded by the events each area counts (one
// /1/trends query per area); choosing an area lists its trending values,
// zooming in re-cuts the grid inside it.
import { api, url, esc, fmt } from './api.js';
import { bars } from './charts.js';

const COLS = 8, ROWS = 4, PARALLEL = 4;
const WORLD = { s: -90, w: -180, n: 90, e: 180 };

export function mount(root) {
  root.innerHTML = `<h1>Regional trends</h1>
  <div class="card row"><label>Window <select id="tr-days"><option value="1">last day</option><option value="7" selected>last 7 days</option><option value="30">last 30 days</option><option value="90">last 90 days</option></select></label>
    <nav class="row" id="tr-crumbs" aria-label="Zoom"></nav><span class="muted" id="tr-info" role="status"></span></div>
  <div class="cols-map" style="margin-top:14px">
    <section class="card"><svg class="map" id="tr-map" role="group" aria-label="Map of areas"></svg>
      <p class="muted">Equirectangular projection; each area is shaded by the events on located objects it counts. Choose an area (click, or Tab then Enter) to see its trending values.</p></section>
    <section class="card reserve" id="tr-area" aria-live="polite"><h2>Area</h2><p class="muted">Choose an area on the map.</p></section>
  </div>
  <p id="tr-error" class="error" role="alert"></p>`;
  const $ = (s) => root.querySelector(s);
  const ctl = new AbortController();
  let stack = [WORLD];
  let selected = null;
  let generation = 0;

  const window_ = () => {
    const days = Number($('#tr-days').value);
    const end = Date.now();
    return { startDate: end - days * 86400000, endDate: end };
  };
  const query = (b) => api(url('/1/trends', { insideBoundingBox: `${b.s},${b.w},${b.n},${b.e}`, ...window_() }), { signal: ctl.signal });
  const name = (b) => `${fmt(b.s, 2)}°..${fmt(b.n, 2)}° lat, ${fmt(b.w, 2)}°..${fmt(b.e, 2)}° lng`;

  function cells(box) {
    const out = [];
    const dw = (box.e - box.w) / COLS, dh = (box.n - box.s) / ROWS;
    for (let r = 0; r < ROWS; r += 1) {
      for (let c = 0; c < COLS; c += 1) {
        out.push({ s: box.n - (r + 1) * dh, n: box.n - r * dh, w: box.w + c * dw, e: box.w + (c + 1) * dw });
      }
    }
    return out;
  }

  async function showArea(b, el) {
    selected = b;
    for (const c of root.querySelectorAll('.cell')) c.classList.toggle('selected', c === el);
    $('#tr-area').innerHTML = `<h2>${esc(name(b))}</h2><p class="muted">Loading…</p>`;
    try {
      const t = await query(b);
      if (selected !== b) return;
      const facets = Object.entries(t.facets);
      $('#tr-area').innerHTML = `<h2>${esc(name(b))}</h2>
        <p class="muted">${fmt(t.eventsCounted)} events counted from ${esc(t.from)} to ${esc(t.to)}.</p>
        ${facets.map(([f, values]) => `<h2 style="margin-top:10px">${esc(f)}</h2>${bars(values.map((v) => ({ label: v.value, value: v.score, attrs: { facet: f, value: v.value } })))}`).join('') || '<p class="muted">No trending value here.</p>'}
        <div class="row" style="margin-top:10px"><button type="button" id="tr-zoom">Zoom into this area</button></div>`;
      $('#tr-zoom').addEventListener('click', () => { stack.push(b); draw(); });
      root.dataset.area = JSON.stringify(b);
    } catch (err) {
      if (err.name !== 'AbortError') $('#tr-area').innerHTML = `<h2>${esc(name(b))}</h2><p class="error">${esc(err.message)}</p>`;
    }
  }

  async function draw() {
    const mine = ++generation;
    const box = stack[stack.length - 1];
    const map = $('#tr-map');
    map.setAttribute('viewBox', `${box.w} ${-box.n} ${box.e - box.w} ${box.n - box.s}`);
    map.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    const step = Math.max(1, 10 ** Math.floor(Math.log10((box.e - box.w) / 4)));
    let grat = '';
    for (let x = Math.ceil(box.w / step) * step; x <= box.e; x += step) grat += `M${x},${-box.n}V${-box.s}`;
    for (let y = Math.ceil(box.s / step) * step; y <= box.n; y += step) grat += `M${box.w},${-y}H${box.e}`;
    const list = cells(box);
    map.innerHTML = `<path class="grat" d="${grat}"/>${list.map((c, i) => `<rect class="cell" tabindex="0" role="button" data-cell="${i}" x="${c.w}" y="${-c.n}" width="${c.e - c.w}" height="${c.n - c.s}"><title>${esc(name(c))}</title></rect>`).join('')}`;
    $('#tr-crumbs').innerHTML = stack.map((b, i) => `<button type="button" class="secondary" data-level="${i}"${i === stack.length - 1 ? ' aria-current="true"' : ''}>${i === 0 ? 'World' : `zoom ${i}`}</button>`).join('');
    for (const b of $('#tr-crumbs').querySelectorAll('button')) {
      b.addEventListener('click', () => { stack = stack.slice(0, Number(b.dataset.level) + 1); draw(); });
    }
    const rects = [...map.querySelectorAll('.cell')];
    rects.forEach((r, i) => {
      const open = () => showArea(list[i], r);
      r.addEventListener('click', open);
      r.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(); } });
    });
    $('#tr-info').textContent = 'counting events per area…';
    const counts = new Array(list.length).fill(0);
    let next = 0;
    const worker = async () => {
      while (next < list.length && mine === generation) {
        const i = next++;
        try {
          counts[i] = (await query(list[i])).eventsCounted;
        } catch (err) {
          if (err.name === 'AbortError') return;
          $('#tr-error').textContent = `Cannot read trends: ${err.message}`;
          return;
        }
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    if (mine !== generation) return;
    const max = Math.max(1, ...counts);
    rects.forEach((r, i) => {
      r.dataset.events = counts[i];
      r.style.fill = counts[i] ? `rgba(197,48,48,${(0.15 + 0.7 * (counts[i] / max)).toFixed(2)})` : '';
    });
    $('#tr-info').textContent = `${fmt(counts.reduce((a, b) => a + b, 0))} events in view`;
    root.dataset.counted = '1';
  }

  $('#tr-days').addEventListener('change', draw);
  draw();
  return () => { generation += 1; ctl.abort(); };
}
