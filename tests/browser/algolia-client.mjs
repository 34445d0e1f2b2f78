// Algolia's JavaScript Insights client (v5) pointed at affinity serve,
// created with compression: 'gzip' so a batch over 750 bytes goes out as
// Content-Encoding: gzip; prints each call's answer as JSON.
// Usage: node algolia-client.mjs HOST:PORT APP KEY
import { insightsClient } from '@algolia/client-insights';

const [host, app, key] = process.argv.slice(2);
const client = insightsClient(app, key, undefined, {
  hosts: [{ url: host, protocol: 'http', accept: 'readWrite' }],
  compression: 'gzip',
});
const now = Date.now();
const big = Array.from({ length: 40 }, (_, i) => ({
  eventType: 'click', eventName: 'Product Clicked', index: 'products',
  userToken: `js-gzip-${i % 4}`, timestamp: now - i, filters: ['brand%3AApple'],
}));
const small = [{
  eventType: 'conversion', eventSubtype: 'purchase', eventName: 'Product Bought',
  index: 'products', userToken: 'js-small', objectIDs: ['p1', 'p2'],
  objectData: [{ price: 10.5, quantity: 2, discount: '1' }, { price: '3', quantity: 1 }],
  value: 23, currency: 'EUR', timestamp: now,
}];
const out = {};
out.big = await client.pushEvents({ events: big });
out.small = await client.pushEvents({ events: small });
try {
  await client.pushEvents({ events: [{ ...small[0], currency: 'euro' }] });
  out.invalid = 'accepted';
} catch (e) {
  out.invalid = { status: e.status, message: e.message };
}
console.log(JSON.stringify(out));
