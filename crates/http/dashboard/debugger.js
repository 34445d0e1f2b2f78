// Events debugger: this server's accepted and rejected events, live (a long
// poll of /1/events/debug by cursor), filtered by status, user and name.
import { api, url, esc } from './api.js';

const KEEP = 500;

export function mount(root) {
  root.innerHTML = `<h1>Events</h1>
  <form class="card row" id="filter" role="search">
    <label>Status <select id="f-status"><option value="">all</option><option value="accepted">accepted</option><option value="rejected">rejected</option></select></label>
    <label>userToken <input id="f-user" size="16"></label>
    <label>eventName <input id="f-name" size="16"></label>
    <button type="submit">Apply</button>
    <button type="button" class="secondary" id="pause" aria-pressed="false">Pause</button>
    <span class="muted" id="live" role="status"></span>
  </form>
  <section class="card" style="margin-top:14px"><div class="events-table"><table>
    <thead><tr><th>received</th><th>status</th><th>event</th><th>user</th><th>reason / objects</th><th>origin</th></tr></thead>
    <tbody id="rows"><tr><td colspan="6" class="muted">Loading…</td></tr></tbody></table></div></section>
  <p id="ev-error" class="error" role="alert"></p>`;
  const $ = (s) => root.querySelector(s);
  let ctl = null;
  let stopped = false;
  let paused = false;
  let entries = [];

  const filters = () => ({ status: $('#f-status').value, userToken: $('#f-user').value.trim(), eventName: $('#f-name').value.trim() });

  function draw() {
    $('#rows').innerHTML = entries.length ? entries.map((e) => {
      const ev = e.event && typeof e.event === 'object' ? e.event : {};
      const detail = e.rejection ? `<code>${esc(e.rejection.code)}</code> ${esc(e.rejection.message)}`
        : esc((ev.objectIDs || ev.filters || []).join(', '));
      return `<tr data-seq="${e.seq}" data-status="${e.status}"><td class="mono">${esc(e.receivedAt)}</td>
        <td class="status-${e.status}">${e.status}</td><td>${esc(ev.eventType ?? '')} ${esc(ev.eventName ?? (e.event === null ? '(no body)' : ''))}</td>
        <td>${esc(ev.userToken ?? '')}${ev.authenticatedUserToken ? ` → ${esc(ev.authenticatedUserToken)}` : ''}</td>
        <td>${detail}</td><td class="muted">${esc(e.request.origin ?? e.request.remoteAddr ?? '')}</td></tr>`;
    }).join('') : '<tr><td colspan="6" class="muted">No event matches yet; new ones appear here as they arrive.</td></tr>';
    root.dataset.rows = entries.length;
  }

  async function follow() {
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const { signal } = ctl;
    const f = filters();
    try {
      const first = await api(url('/1/events/debug', { ...f, limit: 200 }), { signal });
      entries = first.events.slice().reverse();
      draw();
      let cursor = first.cursor;
      $('#live').textContent = 'live';
      while (!stopped && !signal.aborted) {
        if (paused) { await new Promise((r) => setTimeout(r, 500)); continue; }
        const next = await api(url('/1/events/debug', { ...f, since: cursor, wait: 20, limit: 1000 }), { signal });
        cursor = next.cursor;
        if (next.events.length && !paused) {
          entries = next.events.slice().reverse().concat(entries).slice(0, KEEP);
          draw();
        }
        $('#ev-error').textContent = '';
      }
    } catch (err) {
      if (err.name === 'AbortError' || stopped) return;
      $('#ev-error').textContent = `Cannot follow the events: ${err.message}`;
      $('#live').textContent = 'stopped';
    }
  }

  $('#filter').addEventListener('submit', (e) => { e.preventDefault(); follow(); });
  $('#pause').addEventListener('click', () => {
    paused = !paused;
    $('#pause').setAttribute('aria-pressed', String(paused));
    $('#pause').textContent = paused ? 'Resume' : 'Pause';
    $('#live').textContent = paused ? 'paused' : 'live';
  });
  follow();
  return () => { stopped = true; if (ctl) ctl.abort(); };
}
