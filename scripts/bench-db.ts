/**
 * Database safety figures (prints numbers; never fails on speed), on a generated database of
 * `SB_BENCH_DB_MB` MB (default 50) of conversation history and answered inbox rows:
 *  1. what opening costs: the header check, and `PRAGMA quick_check` (which start runs only on
 *     a database ≤ 32 MiB or after an unclean stop) — from the page cache; run it as root after
 *     `sync; echo 3 > /proc/sys/vm/drop_caches` for the cold figure of the first round;
 *  2. `switchboard backup`: time and size of the online copy (the CLI itself, as an operator runs it).
 * Run: npm run bench:db
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { openDatabase } from '../src/store/db.ts';
import { checkDatabaseHeader, quickCheck } from '../src/store/integrity.ts';

const targetMb = Number(process.env.SB_BENCH_DB_MB ?? 50);
const dir = mkdtempSync(join(tmpdir(), 'sb-bench-db-'));
const dataDir = join(dir, 'data');
const path = join(dataDir, 'switchboard.db');
const ms = (start: number): string => `${(performance.now() - start).toFixed(1)} ms`;

try {
  let started = performance.now();
  const db = openDatabase(path);
  const history = db.prepare('INSERT INTO history (conversation, turn, message, created_at) VALUES (?, ?, ?, ?)');
  const inbox = db.prepare("INSERT INTO inbox (channel, platform_id, conversation, payload, status, received_at, done_at) VALUES ('webhook', ?, ?, ?, 'done', ?, ?)");
  const text = 'lorem ipsum dolor sit amet '.repeat(16);
  for (let batch = 0; statSync(path).size + statSync(`${path}-wal`).size < targetMb * 1e6; batch++) {
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) {
        const n = batch * 2000 + i;
        history.run(`webhook:webhook:c${n % 500}`, n, JSON.stringify({ role: n % 2 ? 'assistant' : 'user', content: `${text}${n}` }), Date.now());
        if (n % 2 === 0) inbox.run(`m${n}`, `webhook:webhook:c${n % 500}`, JSON.stringify({ text: `${text}${n}` }), Date.now(), Date.now());
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  }
  db.close();
  const size = statSync(path).size;
  console.log(`database: ${(size / 1024 / 1024).toFixed(1)} MiB, built in ${ms(started)}`);

  for (let round = 1; round <= 3; round++) {
    started = performance.now();
    checkDatabaseHeader(path);
    const header = ms(started);
    const check = new Database(path);
    started = performance.now();
    quickCheck(check, path);
    const quick = ms(started);
    check.close();
    started = performance.now();
    openDatabase(path).close();
    console.log(`round ${round}: header check ${header} · PRAGMA quick_check ${quick} · openDatabase (auto: ${size > 32 * 1024 * 1024 ? 'header only' : 'with quick_check'}) ${ms(started)}`);
  }

  const config = join(dir, 'switchboard.toml');
  writeFileSync(config, 'data_dir = "./data"\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "unused"\n[channels.terminal]\n');
  const cli = fileURLToPath(new URL('../app/cli.ts', import.meta.url));
  for (let round = 1; round <= 3; round++) {
    started = performance.now();
    const out = execFileSync(process.execPath, [cli, 'backup', join(dir, 'copy.db'), '--force', '--config', config], { encoding: 'utf8' });
    console.log(`backup round ${round}: ${out.trim()} (the whole CLI run: ${ms(started)})`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
