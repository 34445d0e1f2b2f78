// The API as the dashboard calls it: the login lives in sessionStorage and
// goes in headers, never in a URL.
const KEY = 'affinity.dashboard.login';

export function login() {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) || 'null');
  } catch {
    return null;
  }
}

export function saveLogin(app, key) {
  sessionStorage.setItem(KEY, JSON.stringify({ app, key }));
}

export function logout() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// `path` with its query parameters (values encoded; undefined ones left out).
export function url(path, params = {}) {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  return q.length ? `${path}?${q.join('&')}` : path;
}

export async function api(path, { method = 'GET', body, signal, as } = {}) {
  const who = as || login();
  const headers = { 'X-Algolia-Application-Id': who?.app ?? '', 'X-Algolia-API-Key': who?.key ?? '' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const r = await fetch(path, {
    method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { message: text };
  }
  if (!r.ok) throw new ApiError(r.status, data?.message || `${r.status} ${r.statusText}`);
  return data;
}

export const enc = encodeURIComponent;

// Text made safe for innerHTML.
export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function fmt(n, digits = 0) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function bytes(n) {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${fmt(n, i ? 1 : 0)} ${units[i]}`;
}
