/**
 * Channel leases on a real PostgreSQL: one holder per channel across "nodes" (lease sets on the
 * same database), handed over when the holder stops competing (a config reload removed the
 * channel there) or stops altogether, and channels added while running.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startLeases, type Leases } from './leases.ts';
import { startPostgres, type TestPostgres } from '../../test/support/postgres.ts';
import { testLogger } from '../../test/support/log.ts';
import { until } from '../../test/support/wait.ts';

describe('channel leases', () => {
  let server: TestPostgres;
  const open: Leases[] = [];
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    await Promise.all(open.map((leases) => leases.stop()));
    server?.stop();
  });

  /** A node's leases, recording what it started and stopped. */
  async function node(url: string, names: string[]) {
    const events: string[] = [];
    const leases = await startLeases(names, { url, log: testLogger(), retryMs: 100, keepaliveSeconds: 3 }, {
      onAcquired: async (name) => void events.push(`+${name}`),
      onLost: async (name) => void events.push(`-${name}`),
    });
    open.push(leases);
    return { leases, events };
  }

  it('gives each channel to one node, hands it over when its holder stops competing, and takes channels added later', async () => {
    const url = await server.createDatabase();
    const a = await node(url, ['telegram']);
    await until(() => a.leases.held().has('telegram'), 'a to hold telegram', 5000);
    const b = await node(url, ['telegram']);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(b.leases.held().size, 0, 'b waits while a holds it');

    // a reload on a removes the channel there: b takes it over
    await a.leases.remove('telegram');
    assert.equal(a.leases.held().has('telegram'), false);
    await until(() => b.leases.held().has('telegram'), 'b to take telegram over', 5000);
    assert.deepEqual(b.events, ['+telegram']);

    // added back on a: b keeps it; a new channel added on a is a's at once
    a.leases.add('telegram');
    a.leases.add('irc');
    a.leases.add('irc'); // twice is once
    await until(() => a.leases.held().has('irc'), 'a to take irc', 5000);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(a.leases.held().has('telegram'), false, 'b still holds telegram');
    assert.deepEqual(a.events, ['+telegram', '+irc']);

    // b stops: a takes telegram again
    await b.leases.stop();
    await until(() => a.leases.held().has('telegram'), 'a to take telegram back', 5000);
    assert.deepEqual(a.events, ['+telegram', '+irc', '+telegram']);
    assert.deepEqual(b.events, ['+telegram'], 'a stop is not a loss (the runtime stops its channels itself)');
  });
});
