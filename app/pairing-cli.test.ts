import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { PairingStore } from '../src/policy/access.ts';
import { openDatabase } from '../src/store/db.ts';
import { sqliteDatabase } from '../src/store/sqlite-sql.ts';
import { age, pairingUsage, runPairingCommand } from './pairing-cli.ts';

async function run(args: string[], pairing: PairingStore, now?: number): Promise<{ code: number; out: string; err: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (chunk: Buffer) => (o += chunk.toString()));
  err.on('data', (chunk: Buffer) => (e += chunk.toString()));
  const code = await runPairingCommand(args, async () => ({ pairing, close: async () => undefined }), out, err, now === undefined ? undefined : () => now);
  return { code, out: o, err: e };
}

describe('switchboard pairing', () => {
  it('lists waiting requests and approves one by channel and code', async () => {
    const pairing = new PairingStore(sqliteDatabase(openDatabase(':memory:')));
    assert.match((await run(['list'], pairing)).out, /No pairing requests are waiting/);
    const { code } = await pairing.requestCode('telegram', 'u42');
    const { code: other } = await pairing.requestCode('discord', '80351110224678912');
    // Under a header, the columns the usage and the README name: channel, sender, code, age.
    const listed = (await run(['list'], pairing, Date.now() + 4 * 60_000 + 1000)).out;
    assert.equal(
      listed,
      `CHANNEL   SENDER             CODE${' '.repeat(code.length - 2)}AGE\n` +
        `telegram  u42                ${code}  4 min\n` +
        `discord   80351110224678912  ${other}  4 min\n`,
    );
    assert.match(pairingUsage, /list {23}pending codes: channel, sender, code, age/);
    const approved = await run(['approve', 'telegram', code], pairing);
    assert.equal(approved.code, 0);
    assert.match(approved.out, /Approved u42 on telegram/);
    assert.equal(await pairing.isApproved('telegram', 'u42'), true);
    const again = await run(['approve', 'telegram', code], pairing);
    assert.equal(again.code, 1);
    assert.match(again.err, /no waiting request with code/);
  });

  it('says how long a code has waited', () => {
    assert.deepEqual([age(12_400), age(4 * 60_000), age(65 * 60_000)], ['12 s', '4 min', '1 h 5 min']);
  });

  it('exits 2 on usage errors', async () => {
    const pairing = new PairingStore(sqliteDatabase(openDatabase(':memory:')));
    for (const args of [[], ['frob'], ['approve', 'telegram'], ['list', 'x']]) assert.equal((await run(args, pairing)).code, 2, JSON.stringify(args));
  });
});
