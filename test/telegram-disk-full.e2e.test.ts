/**
 * Issue 22's repro: a Telegram bot whose data_dir's disk fills while messages keep coming
 * (one every 100 ms): 5 before, 15 while full, 15 after space is freed. Every message is
 * answered exactly once — the first one after the disk filled included. It was lost: the
 * inbox's `INSERT … RETURNING seq` handed back a seq whose commit had failed (see
 * src/store/sqlite-sql.ts), so the offset moved past a message that was never stored.
 *
 * 8 MB, not 2: SQLite's WAL grows to ~4 MB before its automatic checkpoint, so a smaller disk
 * fills again from the WAL alone once the filler is gone (and stays full: the checkpoint needs
 * room in the main file to give the WAL's space back).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { startFakeOpenAI, type FakeOpenAI } from './fixtures/fake-openai.ts';
import { startTelegramPeer, type TelegramPeer } from './peers/telegram.ts';
import { startDaemon, type Daemon } from './support/cli.ts';
import { mountTmpfs, type Tmpfs } from './support/tmpfs.ts';
import { quiet, until } from './support/wait.ts';

const mounted = mountTmpfs('8m');
const skip = 'skip' in mounted ? mounted.skip : false;
const dm = { kind: 'dm', user: 'alice' } as const;

describe('telegram: the disk fills between two messages', { skip }, () => {
  const disk = mounted as Tmpfs;
  let model: FakeOpenAI;
  let peer: TelegramPeer;
  let daemon: Daemon;
  let configDir: string;

  before(async () => {
    model = await startFakeOpenAI();
    // 35 messages from one person within seconds: Telegram would pace the 70 calls to her chat
    // (typing and reply each) at about one a second. What this tests is the disk, not that pace
    // (channels/telegram/index.test.ts tests flood control): a burst allowance that covers them.
    peer = await startTelegramPeer({ flood: { burst: 100 } });
    configDir = mkdtempSync(join(tmpdir(), 'sb-tgfull-'));
    const file = join(configDir, 'switchboard.toml');
    writeFileSync(
      file,
      `data_dir = ${JSON.stringify(disk.dir)}\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "${model.baseUrl}"\nmodel = "test-model"\napi_key = "\${TEST_MODEL_KEY}"\n` +
        `[log]\nformat = "json"\n[memory]\nbackend = "none"\n[runtime]\nrestart_initial_seconds = 0.2\nrestart_max_seconds = 1\n${peer.configSection()}poll_timeout_seconds = 1\nallow = ["${peer.users.alice}"]\n`,
    );
    daemon = startDaemon(['start', '--config', file], { env: { TEST_MODEL_KEY: 'k' } });
    await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  });
  after(async () => {
    if (daemon && daemon.child.exitCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    await peer?.close();
    await model?.close();
    disk.unmount();
    rmSync(configDir, { recursive: true, force: true });
  });

  it('answers every message once: before, while and after the disk is full', async () => {
    const texts = (): string[] => peer.botMessages(dm).map((m) => m.text);
    const log = (): string => `\nbot: ${JSON.stringify(texts())}\n${daemon.stdout().slice(-6000)}`;
    const sent: string[] = [];
    const say = async (text: string): Promise<void> => {
      sent.push(text);
      await peer.post('alice', dm, text);
      await quiet(100);
    };
    for (let n = 1; n <= 5; n++) await say(`before ${n}`);
    await until(() => texts().length >= 5, 'the replies before', 15_000, log);
    const filler = disk.fill();
    for (let n = 1; n <= 15; n++) await say(`full ${n}`);
    await quiet(1500);
    rmSync(filler);
    for (let n = 1; n <= 15; n++) await say(`after ${n}`);
    await until(() => texts().length >= sent.length, 'every reply', 40_000, () => `${log()}\n${execFileSync('df', [disk.dir]).toString()}`);
    await quiet(1500);
    assert.deepEqual([...texts()].sort(), sent.map((text) => `echo: ${text}`).sort(), log());
    daemon.child.kill('SIGTERM');
    assert.equal((await daemon.exited).code, 0);
    const db = new Database(join(disk.dir, 'switchboard.db'), { readonly: true });
    try {
      const rows = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM inbox WHERE status = 'done'").get()!;
      assert.equal(rows.n, sent.length);
    } finally {
      db.close();
    }
  });
});
