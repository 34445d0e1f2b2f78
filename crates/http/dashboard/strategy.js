// Strategy editor: sliders for event scores, facet scores and the impact;
// every change previews the candidate on a sample of real users' profiles
// (stores nothing); Save sets it. Below, the A/B test panel
// (variants.js), whose variants can take the sliders' strategy.
import { api, esc, ApiError } from './api.js';
import { bars } from './charts.js';
import { mountVariants } from './variants.js';

const SAMPLE = 6;
const TYPES = ['view', 'click', 'conversion'];

export function mount(root) {
  root.innerHTML = `<h1>Strategy</h1>
  <div class="cols2">
    <form class="card stack" id="editor"><div><h2>Event scores</h2><div id="ev"></div>
        <div class="row" style="margin-top:6px"><input id="new-ev" placeholder="eventName" maxlength="64" aria-label="New event name" style="flex:1;min-width:0">
        <select id="new-ev-type" aria-label="New event type">${TYPES.map((t) => `<option>${t}</option>`).join('')}</select>
        <button type="button" class="secondary" id="add-ev">Add event</button></div></div>
      <div><h2>Facet scores</h2><div id="fa"></div>
        <div class="row" style="margin-top:6px"><input id="new-fa" placeholder="facet" aria-label="New facet name" style="flex:1;min-width:0">
        <button type="button" class="secondary" id="add-fa">Add facet</button></div></div>
      <div><h2>Personalization impact</h2><div id="impact"></div></div>
      <div class="row"><button type="submit" id="save">Save strategy</button><span id="saved" class="muted" role="status"></span></div>
      <p id="st-error" class="error" role="alert"></p>
    </form>
    <section class="card reserve" id="preview" aria-live="polite"><h2>Preview on ${SAMPLE} users</h2>
      <p class="muted">Grey: the current strategy; blue: the candidate. Nothing is stored until you save.</p><div id="pv"><p class="muted">Loading…</p></div></section>
  </div>
  <section class="card ab" id="ab" aria-labelledby="ab-h"></section>`;
  const $ = (s) => root.querySelector(s);
  const ctl = new AbortController();
  let candidate = { eventsScoring: [], facetsScoring: [], personalizationImpact: 50 };
  let timer = null;
  let seq = 0;

  const slider = (id, label, value, max = 100) => `<label class="slider"><span>${esc(label)}</span>
    <input type="range" min="0" max="${max}" step="1" value="${value}" data-slider="${esc(id)}" aria-label="${esc(label)} score">
    <output>${value}</output></label>`;

  function draw() {
    $('#ev').innerHTML = candidate.eventsScoring.map((e, i) => slider(`ev:${i}`, `${e.eventName} (${e.eventType})`, e.score)).join('')
      || '<p class="muted">No event scored yet.</p>';
    $('#fa').innerHTML = candidate.facetsScoring.map((f, i) => slider(`fa:${i}`, f.facetName, f.score)).join('')
      || '<p class="muted">No facet scored yet.</p>';
    $('#impact').innerHTML = slider('impact', 'impact', candidate.personalizationImpact);
    for (const input of root.querySelectorAll('input[type=range]')) {
      input.addEventListener('input', () => {
        const v = Number(input.value);
        input.nextElementSibling.textContent = v;
        const [kind, i] = input.dataset.slider.split(':');
        if (kind === 'ev') candidate.eventsScoring[i].score = v;
        else if (kind === 'fa') candidate.facetsScoring[i].score = v;
        else candidate.personalizationImpact = v;
        $('#saved').textContent = 'unsaved changes';
        schedule();
      });
    }
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(preview, 250);
  }

  async function preview() {
    const mine = ++seq;
    if (!candidate.eventsScoring.length || !candidate.facetsScoring.length) {
      $('#pv').innerHTML = '<p class="muted">Add an event and a facet to preview.</p>';
      return;
    }
    try {
      const r = await api('/1/strategies/personalization/preview', {
        method: 'POST', signal: ctl.signal, body: { strategy: candidate, sample: SAMPLE },
      });
      if (mine !== seq) return;
      $('#st-error').textContent = '';
      const users = r.users.filter((u) => u.current || u.candidate);
      $('#pv').innerHTML = users.map((u) => {
        const rows = [];
        const facets = new Set([...Object.keys(u.current?.scores || {}), ...Object.keys(u.candidate?.scores || {})]);
        for (const f of facets) {
          const cur = u.current?.scores?.[f] || {};
          const cand = u.candidate?.scores?.[f] || {};
          const values = [...new Set([...Object.keys(cur), ...Object.keys(cand)])]
            .sort((a, b) => (cand[b] || 0) - (cand[a] || 0) || (cur[b] || 0) - (cur[a] || 0)).slice(0, 5);
          for (const v of values) {
            rows.push({ label: `${f}: ${v}`, value: cand[v] || 0, old: cur[v] || 0, title: `${f}: ${v}: current ${cur[v] || 0}, candidate ${cand[v] || 0}`, attrs: { user: u.userToken, facet: f, value: v, current: cur[v] || 0, candidate: cand[v] || 0 } });
          }
        }
        return `<div class="pv-user" data-user="${esc(u.userToken)}"><h2 style="margin-top:10px">${esc(u.userToken)}</h2>${bars(rows, { max: 20 })}</div>`;
      }).join('') || '<p class="muted">No user has a profile yet.</p>';
      root.dataset.previews = String(Number(root.dataset.previews || 0) + 1);
    } catch (err) {
      if (err.name !== 'AbortError' && mine === seq) $('#st-error').textContent = err.message;
    }
  }

  $('#add-ev').addEventListener('click', () => {
    const name = $('#new-ev').value.trim();
    if (!name) { $('#st-error').textContent = 'eventName is required to add an event'; return; }
    candidate.eventsScoring.push({ eventName: name, eventType: $('#new-ev-type').value, score: 50 });
    $('#new-ev').value = '';
    draw(); schedule();
  });
  $('#add-fa').addEventListener('click', () => {
    const name = $('#new-fa').value.trim();
    if (!name) { $('#st-error').textContent = 'a facet name is required to add a facet'; return; }
    candidate.facetsScoring.push({ facetName: name, score: 50 });
    $('#new-fa').value = '';
    draw(); schedule();
  });
  $('#editor').addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const r = await api('/1/strategies/personalization', { method: 'POST', body: candidate, signal: ctl.signal });
      $('#saved').textContent = `saved at ${r.updatedAt}`;
      $('#st-error').textContent = '';
    } catch (err) {
      if (err.name !== 'AbortError') $('#st-error').textContent = err.message;
    }
  });

  (async () => {
    try {
      const s = await api('/1/strategies/personalization', { signal: ctl.signal });
      candidate = {
        eventsScoring: s.eventsScoring.map(({ eventName, eventType, score }) => ({ eventName, eventType, score })),
        facetsScoring: s.facetsScoring.map(({ facetName, score }) => ({ facetName, score })),
        personalizationImpact: s.personalizationImpact,
      };
      $('#saved').textContent = s.updatedAt ? `current since ${s.updatedAt}` : '';
    } catch (err) {
      if (err.name === 'AbortError') return;
      if (!(err instanceof ApiError && err.status === 404)) $('#st-error').textContent = err.message;
      else $('#saved').textContent = 'no strategy yet';
    }
    draw();
    preview();
  })();
  const stopVariants = mountVariants($('#ab'), { signal: ctl.signal, sliders: () => structuredClone(candidate) });
  return () => { ctl.abort(); clearTimeout(timer); stopVariants(); };
}
