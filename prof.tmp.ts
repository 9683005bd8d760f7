import fc from 'fast-check';
import { markdownText } from '/work/wt-markdown/test/support/fuzz.ts';
import { measure } from '/work/wt-markdown/channels/telegram/render.ts';
import { splitMessage } from '/work/wt-markdown/src/outbound/split.ts';
const samples = fc.sample(markdownText(), { numRuns: 40, seed: 1 });
let calls = 0, chars = 0;
const m = (s: string) => { calls++; chars += s.length; return measure(s); };
let t = performance.now();
for (const s of samples) { const b = performance.now(); calls = 0; chars = 0; splitMessage(s, 4096, { measure: m }); const d = performance.now() - b; if (d > 300) console.log(Math.round(d), 'ms', s.length, 'chars', calls, 'calls', chars, 'measured'); }
console.log('total', Math.round(performance.now() - t));
