/**
 * The web console's JavaScript budget: prints the gzipped size of every script in
 * dist/console and their total, and exits 1 when the total is over 120 KB.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const budget = 120 * 1024;
const dir = new URL('../dist/console/assets/', import.meta.url);
let total = 0;
let css = 0;
for (const name of readdirSync(dir)) {
  const body = readFileSync(join(dir.pathname, name));
  const gz = gzipSync(body, { level: 9 }).length;
  if (name.endsWith('.js')) total += gz;
  if (name.endsWith('.css')) css += gz;
}
const kb = (n: number): string => `${(n / 1024).toFixed(1)} KB`;
process.stdout.write(`console: ${kb(total)} of JavaScript gzipped (budget ${kb(budget)}), ${kb(css)} of CSS\n`);
if (total > budget) {
  process.stderr.write(`console: the JavaScript is over its budget by ${kb(total - budget)}\n`);
  process.exit(1);
}
