// Profile explorer: find a user, their affinities per facet as bars (a bar
// opens its explanation), their recent events, their optionalFilters and a
// re-rank of a sample hit list built from their profile.
import { api, url, enc, esc, fmt, ApiError } from './api.js';
import { bars } from './charts.js';

export function mount(root, { arg }) {
  root.innerHTML = `<h1>Profiles</h1>
  <div class="cols">
    <div class="stack">
      <form class="card" id="find" role="search"><h2>Find a user</h2>
        <div class="row"><label class="sr" for="find-token">userToken</label>
        <input id="find-token" placeholder="userToken" required maxlength="129" style="flex:1;min-width:0">
        <button type="submit">Show</button></div></form>
      <section class="card reserve"><h2>Recent users</h2><p class="muted">From this server's events debugger and a sample of stored profiles.</p>
        <ul class="users" id="users"><li class="muted">Loading…</li></ul></section>
    </div>
    <div class="stack">
      <section class="card reserve" id="profile"><h2>Affinities</h2><p class="muted">Choose a user.</p></section>
      <section class="card reserve" id="explain" aria-live="polite"><h2>Explanation</h2><p class="muted">Choose a bar to see which events, on which days, make its score.</p></section>
      <div class="cols2">
        <section class="card reserve" id="filters"><h2>optionalFilters</h2><p class="muted">–</p></section>
        <section class="card reserve" id="rerank"><h2>Re-rank of a sample hit list</h2><p class="muted">–</p></section>
      </div>
      <section class="card reserve" id="timeline"><h2>Recent events</h2><p class="muted">–</p></section>
    </div>
  </div>`;
  const $ = (s) => root.querySelector(s);
  let stopped = false;
  const ctl = new AbortController();
  const signal = ctl.signal;

  $('#find').addEventListener('submit', (e) => {
    e.preventDefault();
    location.hash = `#/explorer/${enc($('#find-token').value.trim())}`;
  });

  async function loadUsers() {
    const seen = new Map();
    try {
      const d = await api(url('/1/events/debug', { status: 'accepted', limit: 1000 }), { signal });
      for (const e of d.events.slice().reverse()) {
        const u = e.event?.authenticatedUserToken || e.event?.userToken;
        if (u && !seen.has(u)) seen.set(u, 'recent event');
      }
    } catch (err) { if (err.name === 'AbortError') return; }
    try {
      const s = await api('/1/strategies/personalization', { signal });
      const { eventsScoring, facetsScoring, personalizationImpact } = s;
      const p = await api('/1/strategies/personalization/preview', {
        method: 'POST', signal, body: { strategy: { eventsScoring, facetsScoring, personalizationImpact }, sample: 20 },
      });
      for (const u of p.users) if (u.current && !seen.has(u.userToken)) seen.set(u.userToken, 'sampled');
    } catch (err) { if (err.name === 'AbortError') return; }
    if (stopped) return;
    const list = [...seen.entries()].slice(0, 60);
    $('#users').innerHTML = list.length
      ? list.map(([u, why]) => `<li><button type="button" data-user="${esc(u)}"${u === arg ? ' aria-current="true"' : ''}>${esc(u)} <span class="muted">${why}</span></button></li>`).join('')
      : '<li class="muted">No user yet: send events first.</li>';
    for (const b of $('#users').querySelectorAll('button')) {
      b.addEventListener('click', () => { location.hash = `#/explorer/${enc(b.dataset.user)}`; });
    }
  }

  async function explain(user, facet, value) {
    $('#explain').innerHTML = `<h2>Explanation: ${esc(facet)} = ${esc(value)}</h2><p class="muted">Loading…</p>`;
    try {
      const x = await api(url(`/1/profiles/personalization/${enc(user)}/explain`, { facet, value }), { signal });
      const days = new Map();
      for (const c of x.contributions) days.set(c.day, (days.get(c.day) || 0) + c.contribution);
      $('#explain').innerHTML = `<h2>Explanation: ${esc(facet)} = ${esc(value)}</h2>
        <p><strong data-explained-score="${esc(x.score ?? '')}">score ${x.score ?? '–'}</strong> · <code>${esc(x.formula ?? '')}</code></p>
        <p class="muted">raw ${fmt(x.raw)} of the user's highest ${fmt(x.maxRaw?.raw)} (${esc(x.maxRaw?.facet ?? '')} = ${esc(x.maxRaw?.value ?? '')});
        rank ${x.rank ?? '–'} of ${x.facetValues} values; window from ${esc(x.windowStart)} (${x.retentionDays} days)${x.nextChange ? `; next change ${esc(x.nextChange.at)} → ${x.nextChange.score ?? 'dropped'}` : ''}.</p>
        <h2>Contribution per day</h2>
        ${bars([...days.entries()].sort().map(([d, v]) => ({ label: d, value: v })))}
        <table style="margin-top:8px"><thead><tr><th>day</th><th>event</th><th>user</th><th class="num">events</th><th class="num">count</th><th class="num">score</th></tr></thead>
        <tbody>${x.contributions.map((c) => `<tr><td>${esc(c.day)}</td><td>${esc(c.eventType)} · ${esc(c.eventName)}</td><td>${esc(c.userToken)}</td><td class="num">${fmt(c.events)}</td><td class="num">${fmt(c.count)}</td><td class="num">${fmt(c.contribution)}</td></tr>`).join('')}</tbody></table>
        ${x.notScored.length ? `<p class="muted">Not scored by the strategy: ${x.notScored.map((n) => `${esc(n.eventType)} · ${esc(n.eventName)} (${n.events})`).join(', ')}</p>` : ''}`;
    } catch (err) {
      if (err.name !== 'AbortError') $('#explain').innerHTML = `<h2>Explanation</h2><p class="error">${esc(err.message)}</p>`;
    }
  }

  async function show(user) {
    $('#find-token').value = user;
    let profile;
    try {
      profile = await api(`/1/profiles/personalization/${enc(user)}`, { signal });
    } catch (err) {
      if (err.name === 'AbortError') return;
      $('#profile').innerHTML = `<h2>Affinities of ${esc(user)}</h2><p class="${err instanceof ApiError && err.status === 404 ? 'muted' : 'error'}">${err instanceof ApiError && err.status === 404 ? 'No profile: no scored event within retention.' : esc(err.message)}</p>`;
      return;
    }
    const facets = Object.entries(profile.scores);
    $('#profile').innerHTML = `<h2>Affinities of ${esc(user)}</h2>
      <p class="muted">Last event ${esc(profile.lastEventAt ?? '–')}. Scores 1 to 20; choose a bar to explain it.</p>
      ${facets.map(([f, values]) => `<h2 style="margin-top:10px">${esc(f)}</h2>${bars(
    Object.entries(values).sort((a, b) => b[1] - a[1]).map(([v, s]) => ({ label: v, value: s, attrs: { facet: f, value: v, score: s } })),
    { clickable: true, max: 20 },
  )}`).join('') || '<p class="muted">No facet scored.</p>'}`;
    root.dataset.profileUser = user;
    for (const b of $('#profile').querySelectorAll('button.bar')) {
      b.addEventListener('click', () => {
        for (const o of $('#profile').querySelectorAll('button.bar')) o.setAttribute('aria-pressed', String(o === b));
        explain(user, b.dataset.facet, b.dataset.value);
      });
    }
    loadFilters(user);
    loadRerank(user, profile);
    loadTimeline(user);
  }

  async function loadFilters(user) {
    try {
      const f = await api(`/1/profiles/personalization/${enc(user)}/optionalFilters`, { signal });
      $('#filters').innerHTML = `<h2>optionalFilters</h2><p class="muted">Impact ${f.personalizationImpact}; pass these to Algolia's search.</p>
        <div class="chips">${f.optionalFilters.map((o) => `<span class="chip">${esc(o)}</span>`).join('') || '<span class="muted">none</span>'}</div>`;
    } catch (err) {
      if (err.name !== 'AbortError') $('#filters').innerHTML = `<h2>optionalFilters</h2><p class="error">${esc(err.message)}</p>`;
    }
  }

  async function loadRerank(user, profile) {
    // A sample list: the user's values from weakest to strongest, then one
    // hit no facet of theirs matches, so re-ranking has work to do.
    const values = Object.entries(profile.scores)
      .flatMap(([f, vs]) => Object.entries(vs).map(([v, s]) => ({ f, v, s })))
      .sort((a, b) => a.s - b.s).slice(-6);
    const hits = values.map((x, i) => ({ objectID: `sample-${i + 1}`, [x.f]: x.v }));
    hits.unshift({ objectID: 'sample-0' });
    let index = 'products';
    try {
      const d = await api(url('/1/events/debug', { userToken: user, status: 'accepted', limit: 1 }), { signal });
      index = d.events[0]?.event?.index || index;
      const r = await api(`/1/indexes/${enc(index)}/rerank`, { method: 'POST', signal, body: { userToken: user, hits } });
      $('#rerank').innerHTML = `<h2>Re-rank of a sample hit list</h2><p class="muted">Index ${esc(index)}, impact ${r.personalizationImpact}.</p>
        <table><thead><tr><th class="num">#</th><th>hit</th><th class="num">was</th><th class="num">affinity</th><th class="num">score</th></tr></thead>
        <tbody>${r.hits.map((h, i) => {
    const p = h._rankingInfo.personalization;
    const facets = Object.entries(h).filter(([k]) => !k.startsWith('_') && k !== 'objectID').map(([k, v]) => `${k}: ${v}`).join(', ');
    return `<tr><td class="num">${i + 1}</td><td>${esc(facets || h.objectID)}</td><td class="num">${p.previousPosition}</td><td class="num">${p.affinity}</td><td class="num">${fmt(p.score, 3)}</td></tr>`;
  }).join('')}</tbody></table>`;
    } catch (err) {
      if (err.name !== 'AbortError') $('#rerank').innerHTML = `<h2>Re-rank of a sample hit list</h2><p class="error">${esc(err.message)}</p>`;
    }
  }

  async function loadTimeline(user) {
    try {
      const d = await api(url('/1/events/debug', { userToken: user, limit: 100 }), { signal });
      const list = d.events.slice().reverse();
      $('#timeline').innerHTML = `<h2>Recent events</h2><p class="muted">The last ${list.length} events of ${esc(user)} this server received (events debugger).</p>
        ${list.length ? `<ul class="timeline">${list.map((e) => {
    const ev = e.event || {};
    const what = ev.objectIDs ? `objects ${ev.objectIDs.join(', ')}` : ev.filters ? `filters ${ev.filters.join(', ')}` : '';
    return `<li class="${e.status}"><span class="mono">${esc(e.receivedAt)}</span> <strong>${esc(ev.eventName ?? '')}</strong> <span class="muted">${esc(ev.eventType ?? '')} · ${esc(what)}</span>
      <span class="status-${e.status}">${e.status}${e.rejection ? `: ${esc(e.rejection.message)}` : ''}</span></li>`;
  }).join('')}</ul>` : '<p class="muted">None in this server\'s memory.</p>'}`;
    } catch (err) {
      if (err.name !== 'AbortError') $('#timeline').innerHTML = `<h2>Recent events</h2><p class="error">${esc(err.message)}</p>`;
    }
  }

  loadUsers();
  if (arg) show(arg);
  else $('#find-token').focus();
  return () => { stopped = true; ctl.abort(); };
}
