// Hand-drawn SVG charts: sparklines, bars and a heatmap colour ramp.
import { esc, fmt } from './api.js';

const NS = 'http://www.w3.org/2000/svg';

// A sparkline of `values` (null: no data) in an SVG of fixed size.
export function sparkline(values, { label = '' } = {}) {
  const w = 300, h = 70;
  const nums = values.filter((v) => v !== null && Number.isFinite(v));
  const max = Math.max(1e-9, ...nums);
  const step = values.length > 1 ? w / (values.length - 1) : w;
  let line = '';
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) return;
    const x = (i * step).toFixed(1);
    const y = (h - 4 - (v / max) * (h - 8)).toFixed(1);
    line += `${line ? 'L' : 'M'}${x},${y}`;
  });
  const area = line ? `${line}L${((values.length - 1) * step).toFixed(1)},${h}L${(values.findIndex((v) => v !== null && Number.isFinite(v)) * step).toFixed(1)},${h}Z` : '';
  return `<svg class="spark" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none" role="img" aria-label="${esc(label)}">`
    + `<path class="area" d="${area}"/><path class="line" d="${line}"/></svg>`;
}

// Horizontal bars: `items` of {label, value, max, attrs, title}; buttons
// when `clickable`, so they are keyboard reachable.
export function bars(items, { clickable = false, max } = {}) {
  const top = max ?? Math.max(1, ...items.map((i) => i.value));
  return `<div class="bars">${items.map((i) => {
    const tag = clickable ? 'button type="button" aria-pressed="false"' : 'div';
    const end = clickable ? 'button' : 'div';
    const attrs = Object.entries(i.attrs || {}).map(([k, v]) => ` data-${k}="${esc(v)}"`).join('');
    const old = i.old === undefined ? '' : `<span class="fill old" style="width:${(100 * i.old) / top}%"></span>`;
    const cls = i.old === undefined ? 'fill' : 'fill new';
    return `<${tag} class="bar"${attrs} title="${esc(i.title ?? `${i.label}: ${i.value}`)}">`
      + `<span class="label">${esc(i.label)}</span>`
      + `<span class="track">${old}<span class="${cls}" style="width:${(100 * i.value) / top}%"></span></span>`
      + `<span class="value">${i.value === null ? '–' : fmt(i.value)}</span></${end}>`;
  }).join('')}</div>`;
}

// The colour of `t` in [0, 1] on a dark-to-bright ramp (magma-like).
const RAMP = [[11, 16, 32], [59, 15, 112], [140, 41, 129], [222, 73, 104], [254, 159, 109], [252, 253, 191]];
export function heatColor(t) {
  const x = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const f = x - i;
  const c = RAMP[i].map((a, k) => Math.round(a + (RAMP[i + 1][k] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

export function svg(tag, attrs = {}) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}
