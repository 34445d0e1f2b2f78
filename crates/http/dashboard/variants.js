// The strategy editor's A/B test panel: the running test's variants (their
// configured share, their own strategy or the control) beside each one's
// share of the answers this server served (`variantsServed` of
// /1/dashboard/stats, every 3 s); create or edit a test (2 to 10 variants,
// a variant's strategy taken from the editor's sliders or left to the
// control), save it (PUT: on bad input the server's message, verbatim) and
// stop it (DELETE, once confirmed).
import { api, esc, fmt } from './api.js';

const PATH = '/1/strategies/personalization/variants';
const MAX = 10;
const POLL_MS = 3000;

// `strategy` in a few words: the impact and the facets' scores.
function summary(s) {
  const facets = s.facetsScoring.map((f) => `${f.facetName} ${f.score}`).join(', ');
  const events = s.eventsScoring.length;
  return `impact ${s.personalizationImpact} · ${facets || 'no facet'} · ${events} event${events === 1 ? '' : 's'}`;
}

function strategyText(v) {
  return v.strategy ? `Own: ${summary(v.strategy)}` : "Control: the application's strategy";
}

// `el`: the panel's card; `sliders()`: a copy of the editor's candidate.
export function mountVariants(el, { signal, sliders }) {
  el.innerHTML = `<div class="row spread"><h2 id="ab-h">A/B test</h2><span id="ab-status" class="muted" role="status"></span></div>
    <div id="ab-body"><p class="muted">Loading…</p></div>
    <p id="ab-error" class="error" role="alert"></p>`;
  const $ = (s) => el.querySelector(s);
  let test = null; // the running test's variants ([] when none), once read
  let served = {}; // answers per variant name, this server's
  let draft = null; // the variants being edited
  let timer = null;
  let changes = 0; // local changes: a poll begun before one is stale
  let pollFailed = false; // whether the error shown is a poll's

  const fail = (err) => {
    if (err.name === 'AbortError') return;
    $('#ab-error').textContent = err.message;
    pollFailed = false;
  };

  function drawView() {
    if (!test.length) {
      $('#ab-body').innerHTML = `<p class="muted">No A/B test runs: every user is served the application's strategy.</p>
        <div class="row"><button type="button" id="ab-new">New A/B test</button></div>`;
      $('#ab-new').addEventListener('click', () => edit(null));
      return;
    }
    const rows = test.map((v) => `<tr data-variant="${esc(v.name)}" data-configured="${v.trafficPercentage}">
      <td><code>${esc(v.name)}</code></td><td>${esc(strategyText(v))}</td>
      <td class="num">${v.trafficPercentage}%</td><td class="num" data-cell="served">–</td>
      <td><div class="share"><div class="track" aria-hidden="true"><span class="fill old" style="width:${v.trafficPercentage}%"></span><span class="fill new" data-cell="bar" style="width:0"></span></div><output data-cell="share">–</output></div></td></tr>`);
    $('#ab-body').innerHTML = `<div class="table-wrap"><table class="ab-table">
      <caption class="muted">Grey: the configured share; blue: the share of the answers (profile, optionalFilters, rerank, explain) this server served since it started.</caption>
      <thead><tr><th scope="col">Variant</th><th scope="col">Strategy</th><th scope="col" class="num">Configured</th><th scope="col" class="num">Served</th><th scope="col">Share served</th></tr></thead>
      <tbody>${rows.join('')}</tbody></table></div>
      <div class="row" id="ab-actions"><button type="button" id="ab-edit">Edit test</button><button type="button" class="secondary" id="ab-stop">Stop test</button></div>`;
    $('#ab-edit').addEventListener('click', () => edit(test));
    $('#ab-stop').addEventListener('click', confirmStop);
    drawServed();
  }

  // The served counts and shares, in place (no focus or layout moves).
  function drawServed() {
    if (draft || !test?.length) return;
    const total = test.reduce((n, v) => n + (served[v.name] || 0), 0);
    for (const tr of el.querySelectorAll('tr[data-variant]')) {
      const n = served[tr.dataset.variant] || 0;
      const share = total ? (100 * n) / total : 0;
      tr.dataset.served = String(n);
      tr.dataset.share = total ? share.toFixed(1) : '';
      tr.querySelector('[data-cell="served"]').textContent = fmt(n);
      tr.querySelector('[data-cell="share"]').textContent = total ? `${fmt(share, 1)}%` : '–';
      tr.querySelector('[data-cell="bar"]').style.width = `${share}%`;
    }
  }

  function confirmStop() {
    $('#ab-actions').innerHTML = `<span>Stop the A/B test? Every user will be served the application's strategy.</span>
      <button type="button" id="ab-stop-yes">Stop the test</button><button type="button" class="secondary" id="ab-stop-no">Keep it</button>`;
    $('#ab-stop-yes').addEventListener('click', stop);
    $('#ab-stop-no').addEventListener('click', () => { drawView(); $('#ab-stop').focus(); });
    $('#ab-stop-yes').focus();
  }

  async function stop() {
    try {
      const r = await api(PATH, { method: 'DELETE', signal });
      $('#ab-error').textContent = '';
      $('#ab-status').textContent = `stopped at ${r.updatedAt}`;
      changes += 1;
      test = [];
      drawView();
      $('#ab-new').focus();
    } catch (err) {
      fail(err);
    }
  }

  function edit(from) {
    draft = from
      ? from.map((v) => ({ ...v, strategy: v.strategy ? structuredClone(v.strategy) : undefined }))
      : [{ name: 'control', trafficPercentage: 50 }, { name: 'candidate', trafficPercentage: 50, strategy: sliders() }];
    $('#ab-error').textContent = '';
    drawForm();
    el.querySelector('input[data-field="name"]').focus();
  }

  function drawForm() {
    const rows = draft.map((v, i) => `<fieldset class="ab-row" data-row="${i}"><legend class="sr">Variant ${i + 1}</legend>
      <label>Name<input data-field="name" value="${esc(v.name)}" maxlength="64" spellcheck="false"></label>
      <label>Share %<input data-field="share" type="number" min="0" max="100" step="1" value="${esc(v.trafficPercentage)}" inputmode="numeric"></label>
      <label>Strategy<select data-field="kind"><option value="control"${v.strategy ? '' : ' selected'}>Control</option><option value="own"${v.strategy ? ' selected' : ''}>Own</option></select></label>
      <div class="ab-actions"><button type="button" class="secondary" data-take="${i}"${v.strategy ? '' : ' disabled'}>Use the sliders</button>
        <button type="button" class="link" data-remove="${i}"${draft.length <= 2 ? ' disabled' : ''} aria-label="Remove variant ${i + 1}">Remove</button></div>
      <span class="muted ab-summary">${esc(strategyText(v))}</span></fieldset>`);
    $('#ab-body').innerHTML = `<form id="ab-form" class="stack" novalidate>
      <p class="muted">Users are split by a stable hash of their token; the shares must add up to 100. A control variant serves the application's strategy; an own one, the strategy the editor's sliders had when taken.</p>
      ${rows.join('')}
      <div class="row"><button type="button" class="secondary" id="ab-add"${draft.length >= MAX ? ' disabled' : ''}>Add variant</button>
        <span id="ab-total" class="muted" aria-live="polite"></span></div>
      <div class="row"><button type="submit" id="ab-save">Save test</button><button type="button" class="secondary" id="ab-cancel">Cancel</button></div></form>`;
    drawTotal();
    const form = $('#ab-form');
    form.addEventListener('input', (e) => {
      const row = e.target.closest('[data-row]');
      if (!row) return;
      const v = draft[row.dataset.row];
      if (e.target.dataset.field === 'name') v.name = e.target.value.trim();
      if (e.target.dataset.field === 'share') {
        // Sent as typed (a number when it is one): the server judges it.
        const text = e.target.value.trim();
        v.trafficPercentage = text !== '' && Number.isFinite(Number(text)) ? Number(text) : text;
        drawTotal();
      }
    });
    form.addEventListener('change', (e) => {
      if (e.target.dataset.field !== 'kind') return;
      const i = Number(e.target.closest('[data-row]').dataset.row);
      draft[i].strategy = e.target.value === 'own' ? sliders() : undefined;
      drawForm();
      el.querySelector(`[data-row="${i}"] select`).focus();
    });
    form.addEventListener('click', (e) => {
      const take = e.target.closest('[data-take]');
      const remove = e.target.closest('[data-remove]');
      if (take) {
        const i = Number(take.dataset.take);
        draft[i].strategy = sliders();
        drawForm();
        el.querySelector(`[data-take="${i}"]`).focus();
      } else if (remove) {
        draft.splice(Number(remove.dataset.remove), 1);
        drawForm();
        $('#ab-add').focus();
      }
    });
    $('#ab-add').addEventListener('click', () => {
      draft.push({ name: `variant-${draft.length + 1}`, trafficPercentage: 0 });
      drawForm();
      el.querySelector(`[data-row="${draft.length - 1}"] input`).focus();
    });
    $('#ab-cancel').addEventListener('click', () => {
      draft = null;
      $('#ab-error').textContent = '';
      drawView();
    });
    form.addEventListener('submit', save);
  }

  function drawTotal() {
    const total = draft.reduce((n, v) => n + (typeof v.trafficPercentage === 'number' ? v.trafficPercentage : 0), 0);
    $('#ab-total').textContent = `${draft.length} variants, shares total ${fmt(total, Number.isInteger(total) ? 0 : 1)}%`;
  }

  async function save(e) {
    e.preventDefault();
    const body = {
      variants: draft.map((v) => (v.strategy
        ? { name: v.name, trafficPercentage: v.trafficPercentage, strategy: v.strategy }
        : { name: v.name, trafficPercentage: v.trafficPercentage })),
    };
    try {
      const r = await api(PATH, { method: 'PUT', body, signal });
      $('#ab-error').textContent = '';
      $('#ab-status').textContent = `saved at ${r.updatedAt}`;
      draft = null;
      changes += 1;
      test = null;
      await refresh();
      $('#ab-edit')?.focus();
    } catch (err) {
      fail(err);
    }
  }

  // Re-read the test (unless it is being edited) and the served counts.
  async function refresh() {
    const begun = changes;
    try {
      const [t, stats] = await Promise.all([
        draft ? null : api(PATH, { signal }),
        api('/1/dashboard/stats', { signal }),
      ]);
      if (begun !== changes) return;
      served = stats.variantsServed || {};
      if (pollFailed) $('#ab-error').textContent = '';
      pollFailed = false;
      if (t && !draft && JSON.stringify(t.variants) !== JSON.stringify(test)) {
        test = t.variants;
        drawView();
      } else {
        drawServed();
      }
      el.dataset.polls = String(Number(el.dataset.polls || 0) + 1);
    } catch (err) {
      if (err.name === 'AbortError' || begun !== changes) return;
      if (!$('#ab-error').textContent || pollFailed) {
        $('#ab-error').textContent = `Cannot refresh the A/B test: ${err.message}`;
        pollFailed = true;
      }
    }
  }

  (async function poll() {
    await refresh();
    if (!signal.aborted) timer = setTimeout(poll, POLL_MS);
  })();
  return () => clearTimeout(timer);
}
