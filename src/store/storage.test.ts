import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { diskFullCode, DiskFullError, StorageHealth } from './storage.ts';

function capture(): { log: pino.Logger; lines: Array<{ level: number; msg: string } & Record<string, unknown>> } {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}
const full = (code = 'SQLITE_FULL'): Error => Object.assign(new Error('database or disk is full'), { code });

describe('StorageHealth (a full disk)', () => {
  it('knows the disk-full codes and nothing else', () => {
    assert.equal(diskFullCode(full()), 'SQLITE_FULL');
    assert.equal(diskFullCode(full('ENOSPC')), 'ENOSPC');
    assert.equal(diskFullCode(full('EDQUOT')), 'EDQUOT');
    assert.equal(diskFullCode(full('SQLITE_BUSY')), undefined);
    assert.equal(diskFullCode(new Error('x')), undefined);
    const { log } = capture();
    assert.equal(new StorageHealth({ log }).failed(full('SQLITE_CORRUPT'), 'write'), undefined, 'not ours to handle');
  });

  it('logs the first failure at error with the data_dir, the code and the fix; repeats once per interval with a count', async () => {
    const { log, lines } = capture();
    const health = new StorageHealth({ log, dataDir: '/nowhere/data', repeatLogMs: 50, probeIntervalMs: 60_000 });
    const error = health.failed(full(), 'accept message 1');
    assert.ok(error instanceof DiskFullError);
    assert.equal(error.code, 'SQLITE_FULL');
    for (let n = 0; n < 10; n++) assert.ok(health.refuse(`accept message ${n + 2}`) instanceof DiskFullError);
    assert.equal(lines.length, 1, 'one line, not one per message');
    assert.equal(lines[0]!.level, 50);
    assert.match(lines[0]!.msg, /\/nowhere\/data is full \(SQLITE_FULL\).*Fix: free space/);
    assert.deepEqual(health.state, { writable: false, code: 'SQLITE_FULL', since: health.state.since, refused: 11 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    health.refuse('accept message 12');
    assert.equal(lines.length, 2);
    assert.equal(lines[1]!.level, 50);
    assert.equal(lines[1]!.refused, 11);
    assert.match(lines[1]!.msg, /still full/);
    health.close();
  });

  it('clears by itself once a probe write goes through, logged at info, waking whoever waits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-storage-'));
    try {
      const { log, lines } = capture();
      const health = new StorageHealth({ log, dataDir: dir, probeIntervalMs: 20 });
      health.failed(full('ENOSPC'), 'append a line');
      const waited = health.writable(new AbortController().signal, 10_000);
      await waited;
      assert.deepEqual(health.state, { writable: true });
      assert.equal(health.refuse('accept a message'), undefined);
      assert.equal(lines.at(-1)!.level, 30);
      assert.match(lines.at(-1)!.msg, /takes writes again/);
      assert.deepEqual(readdirSync(dir), [], 'the probe file is removed');
      health.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('without a data_dir (no probe) every write is tried: refuse never refuses', () => {
    const { log } = capture();
    const health = new StorageHealth({ log });
    health.failed(full(), 'write');
    assert.equal(health.refuse('write'), undefined);
    assert.equal(health.state.writable, false);
  });
});
