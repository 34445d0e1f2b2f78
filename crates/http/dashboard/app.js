// The dashboard's shell: login, navigation by the URL's hash (#/page/arg),
// and mounting one page at a time (each page's mount returns its cleanup).
import { api, login, saveLogin, logout, ApiError } from './api.js';
import * as overview from './overview.js';
import * as explorer from './explorer.js';
import * as strategy from './strategy.js';
import * as events from './debugger.js';
import * as keys from './keyvis.js';
import * as trends from './trends.js';

const PAGES = { overview, explorer, strategy, events, keys, trends };
const $ = (id) => document.getElementById(id);
let cleanup = null;

function route() {
  const [page = 'overview', ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  return { page: PAGES[page] ? page : 'overview', arg: rest.map(decodeURIComponent).join('/') };
}

function show() {
  if (cleanup) { cleanup(); cleanup = null; }
  const who = login();
  $('login').hidden = !!who;
  $('nav').hidden = !who;
  $('who').hidden = !who;
  const root = $('page');
  root.replaceChildren();
  if (!who) {
    $('login-app').focus();
    return;
  }
  $('who-app').textContent = who.app;
  const { page, arg } = route();
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  document.title = `${document.querySelector(`#nav a[data-page="${page}"]`).textContent} · Affinity`;
  root.dataset.page = page;
  cleanup = PAGES[page].mount(root, { arg }) || null;
}

$('login').addEventListener('submit', async (e) => {
  e.preventDefault();
  const app = $('login-app').value.trim();
  const key = $('login-key').value;
  $('login-error').textContent = '';
  try {
    await api('/1/dashboard/stats', { as: { app, key } });
    saveLogin(app, key);
    $('login-key').value = '';
    show();
  } catch (err) {
    $('login-error').textContent = err instanceof ApiError && (err.status === 401 || err.status === 403)
      ? 'This application ID and admin key are not accepted.'
      : `Cannot log in: ${err.message}`;
  }
});

$('logout').addEventListener('click', () => {
  logout();
  show();
});

window.addEventListener('hashchange', show);
show();
