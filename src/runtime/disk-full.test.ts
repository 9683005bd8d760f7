/**
 * The runtime on a full disk, simulated with SQLite's `max_page_count` (a write that needs a
 * new page fails with SQLITE_FULL, exactly as on a full disk): messages are refused without
 * being stored, a running turn's reply waits in memory and is recorded and sent once after.
 * test/disk-full.e2e.test.ts does the same with a real full file system.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { TurnHandler } from '../agent/agent.ts';
import { openDatabase, type Db } from '../store/db.ts';
import { sqliteDatabase } from '../store/sqlite-sql.ts';
import { DiskFullError, StorageHealth } from '../store/storage.ts';
import { createMemoryChannel } from '../../test/support/memory-channel.ts';
import { testLogger } from '../../test/support/log.ts';
import { defaultSupervisorOptions } from './supervisor.ts';
import { Runtime } from './runtime.ts';

const dir = mkdtempSync(join(tmpdir(), 'sb-diskfull-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** No new pages from now on: the database is as full as a full disk would make it. */
const fill = (db: Db): void => void db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);
const space = (db: Db): void => void db.pragma('max_page_count = 1073741823');
const big = 'x'.repeat(200_000); // needs overflow pages: a new page is certain

describe('Runtime on a full disk', () => {
  it('refuses messages without storing them, keeps a running reply in memory, and carries on once there is room', async (t) => {
    const db = openDatabase(join(dir, 'full.db'));
    const storage = new StorageHealth({ log: testLogger(), dataDir: dir, probeIntervalMs: 30 });
    const channel = createMemoryChannel();
    const asked: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const agent: TurnHandler = async ({ message }) => {
      asked.push(message.text);
      if (message.text === 'slow') await gate;
      const reply = message.text === 'slow' ? `long: ${big}` : `re: ${message.text}`;
      return { reply, messages: [{ role: 'user', content: message.text }, { role: 'assistant', content: reply }] };
    };
    const runtime = new Runtime({
      database: sqliteDatabase(db),
      log: testLogger(),
      channels: [channel],
      agent,
      historyTurns: 10,
      maxInFlight: 4,
      maxQueued: 10,
      turnTimeoutMs: 10_000,
      shutdownGraceMs: 1000,
      supervisor: defaultSupervisorOptions,
      delivery: { attemptsPerRound: 2, initialBackoffMs: 5, maxBackoffMs: 20 },
      storage,
    });
    await runtime.start();
    await runtime.ready;
    t.after(async () => {
      release();
      await runtime.stop();
      db.close();
    });

    // A turn runs; the disk fills before its (big) reply is recorded.
    assert.equal(await channel.inject({ id: 'm1', text: 'slow' }), 'accepted');
    while (asked.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    fill(db);
    // A message big enough to need a page is the first write to fail.
    await assert.rejects(channel.inject({ id: 'm2', text: big }), (error: unknown) => error instanceof DiskFullError && error.code === 'SQLITE_FULL');
    assert.equal(runtime.health().storage?.writable, false);
    release();
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(channel.sent.length, 0, 'the reply could not be recorded, so it was not sent');
    // While full, even a small message is refused before any write: not stored.
    await assert.rejects(channel.inject({ id: 'm3', text: 'small' }), DiskFullError);
    assert.deepEqual(db.prepare("SELECT count(*) AS n FROM inbox WHERE platform_id IN ('m2', 'm3')").get(), { n: 0 });

    // The probe found room (this disk was never full), but the database still has none: the
    // reply still waits. Then there is room for it too.
    space(db);
    await channel.waitForSent(1);
    assert.equal(channel.sent[0]!.text, `long: ${big}`);
    assert.equal(runtime.health().storage?.writable, true);
    assert.equal(await channel.inject({ id: 'm3', text: 'small' }), 'accepted', 'sent again, taken now');
    await channel.waitForSent(2);
    await runtime.idle();
    assert.deepEqual(asked, ['slow', 'small'], 'the model was asked once per message');
    assert.deepEqual(
      channel.sent.map((message) => message.replyTo),
      ['m1', 'm3'],
      'each answered once',
    );
  });
});
