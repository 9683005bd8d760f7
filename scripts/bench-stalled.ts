/**
 * Stalled clients against the gateway (issue 23, point 6). Starts `switchboard start` (from
 * the source tree: this one, and `--before <dir>` for an older checkout, in the same run) with
 * the webhook channel on a loopback gateway, then, one kind at a time, opens N clients that
 * never finish and never send their FIN:
 *   - webhook: POST /webhook declaring 1 MiB, sending all but its last byte, unsigned;
 *   - forged: the same with a signature header of the right form and time (a wrong HMAC, which
 *     only the body can show) declaring 60 KiB, all but its last byte sent;
 *   - healthz: GET /healthz declaring a 1 MiB body, sending all but its last byte;
 *   - garbage: a line that is not HTTP (the gateway answers 400), then silence.
 * For each it prints the daemon's open file descriptors (/proc/<pid>/fd) and RSS before, 3 s
 * after the clients are in, and 20 s later; then the clients leave. Prints numbers, never fails.
 *
 * Run: npm run bench:stalled -- [--clients 150] [--before /path/to/old/checkout]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cleanUp, children, fmt, readRssMb, ROOT, say, sleep, stopChild, tempDir, within } from './bench-support.ts';
import { freePort } from '../test/support/net.ts';

const { values } = parseArgs({ options: { clients: { type: 'string', default: '150' }, before: { type: 'string' }, settle: { type: 'string', default: '20' } } });
const clients = Number(values.clients);
const settleMs = Number(values.settle) * 1000;
const MiB = 1024 * 1024;

const fds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;

/** `switchboard start` from `root` (its app/cli.ts), with the gateway on `port` and the webhook channel. */
async function startDaemon(root: string, port: number): Promise<ChildProcess> {
  const dir = tempDir('stalled');
  const file = join(dir, 'switchboard.toml');
  // The model is never asked: no request here gets past the signature.
  writeFileSync(
    file,
    `data_dir = "./data"\n[log]\nformat = "json"\nlevel = "warn"\n[agent]\nname = "Bench"\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "k"\n` +
      `[gateway]\nlisten = "127.0.0.1:${port}"\nconsole = false\n[channels.webhook]\nsecret = "bench-secret"\n`,
  );
  const child = spawn(process.execPath, [join(root, 'app', 'cli.ts'), 'start', '--config', file], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  await within(
    (async () => {
      for (;;) {
        const up = await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false);
        if (up) return;
        if (child.exitCode !== null) throw new Error(`the daemon exited (${child.exitCode}):\n${output}`);
        await sleep(200);
      }
    })(),
    30_000,
    'daemon start',
  );
  return child;
}

/** Opens one stalled client of `kind`; resolves once its bytes are written (or it was closed). */
type Kind = 'webhook' | 'forged' | 'healthz' | 'garbage';

function stall(port: number, kind: Kind, open: Socket[]): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    open.push(socket);
    socket.on('error', () => resolve());
    socket.on('close', () => resolve());
    socket.on('data', () => undefined);
    socket.on('connect', () => {
      const host = `127.0.0.1:${port}`;
      if (kind === 'garbage') return void socket.write('THIS IS NOT HTTP\r\n\r\n', () => resolve());
      const size = kind === 'forged' ? 60 * 1024 : MiB;
      const forged = `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}`;
      const head =
        kind === 'healthz'
          ? `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\n\r\n`
          : `POST /webhook HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nIdempotency-Key: k\r\n${kind === 'forged' ? `X-Switchboard-Signature: ${forged}\r\n` : ''}Content-Length: ${size}\r\n\r\n`;
      socket.write(head);
      // All but the last byte: the body never ends. Written in 64 KiB pieces, as a slow sender would.
      const piece = Buffer.alloc(64 * 1024, 'a');
      let sent = 0;
      const more = (): void => {
        while (sent < size - 1) {
          const n = Math.min(piece.length, size - 1 - sent);
          sent += n;
          if (!socket.write(piece.subarray(0, n))) return void socket.once('drain', more);
        }
        resolve();
      };
      more();
    });
  });
}

interface Row {
  readonly kind: string;
  readonly fdsBefore: number;
  readonly fdsIn: number;
  readonly fdsLater: number;
  readonly rssBefore: number;
  readonly rssIn: number;
  readonly rssLater: number;
}

async function measure(label: string, root: string): Promise<Row[]> {
  const port = await freePort();
  const daemon = await startDaemon(root, port);
  const pid = daemon.pid!;
  await sleep(2000);
  const rows: Row[] = [];
  for (const kind of ['webhook', 'forged', 'healthz', 'garbage'] as const) {
    const open: Socket[] = [];
    const fdsBefore = fds(pid);
    const rssBefore = readRssMb(pid).rss;
    // Sent with a bound: a client the daemon no longer reads would wait for 'drain' forever.
    await Promise.race([Promise.all(Array.from({ length: clients }, () => stall(port, kind, open))), sleep(30_000)]);
    await sleep(3000);
    const fdsIn = fds(pid);
    const rssIn = readRssMb(pid).rss;
    await sleep(settleMs);
    const row = { kind, fdsBefore, fdsIn, fdsLater: fds(pid), rssBefore, rssIn, rssLater: readRssMb(pid).rss };
    rows.push(row);
    say(`  ${label} ${kind}: fds ${row.fdsBefore} → ${row.fdsIn} → ${row.fdsLater}; RSS ${fmt(row.rssBefore)} → ${fmt(row.rssIn)} → ${fmt(row.rssLater)} MB`);
    for (const socket of open) socket.destroy();
    await sleep(1000);
  }
  await stopChild(daemon, 'SIGTERM');
  return rows;
}

try {
  say(`Stalled clients: ${clients} per kind, measured 3 s after they are in and ${settleMs / 1000} s later`);
  const runs: Array<[string, Row[]]> = [];
  if (values.before) runs.push(['before', await measure('before', values.before)]);
  runs.push(['after', await measure('after', ROOT)]);
  say();
  say(`| run | clients | fds before → in → +${settleMs / 1000} s | RSS MB before → in → +${settleMs / 1000} s |`);
  say('|---|---|---|---|');
  for (const [label, rows] of runs) {
    for (const row of rows) say(`| ${label} | ${clients} × ${row.kind} | ${row.fdsBefore} → ${row.fdsIn} → ${row.fdsLater} | ${fmt(row.rssBefore)} → ${fmt(row.rssIn)} → ${fmt(row.rssLater)} |`);
  }
} finally {
  cleanUp();
}
