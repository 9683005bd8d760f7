/**
 * `npm test` on a machine without the test servers: the preflight stops at once with the
 * install line when it may not install, and a test file that needs a missing server fails
 * at once instead of waiting for it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { installCommand, missingServers, testServers } from './support/servers.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const empty = mkdtempSync(join(tmpdir(), 'sb-no-servers-'));
after(() => rmSync(empty, { recursive: true, force: true }));

const run = (file: string, env: NodeJS.ProcessEnv): ReturnType<typeof spawnSync> & { ms: number } => {
  const started = Date.now();
  const inherited = { ...process.env };
  delete inherited.NODE_TEST_CONTEXT; // else the inner `node --test` reports to us in its binary format
  const result = spawnSync(process.execPath, [...(file.endsWith('.test.ts') ? ['--test'] : []), file], {
    cwd: root,
    env: { ...inherited, SWITCHBOARD_TEST_SERVER_ROOT: empty, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { ...result, ms: Date.now() - started };
};

describe('test servers missing', () => {
  const line = installCommand(testServers);

  it('names every package in one install line, postfix preseeded', () => {
    assert.equal(missingServers(undefined, empty).length, testServers.length);
    assert.equal(line, 'echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections && apt-get install -y --no-install-recommends ngircd openssl dovecot-imapd dovecot-lmtpd postfix systemd libfaketime postgresql-15 iproute2 tmux chromium');
  });

  it('the preflight stops within seconds with the install line when it may not install', () => {
    const result = run('scripts/test-servers.ts', { SWITCHBOARD_TEST_INSTALL: '0' });
    assert.equal(result.status, 1, String(result.stderr));
    assert.ok(result.ms < 10_000, `took ${result.ms} ms`);
    assert.ok(String(result.stderr).includes(line), String(result.stderr));
    assert.match(String(result.stderr), /Not installing them: SWITCHBOARD_TEST_INSTALL=0/);
  });

  for (const file of ['test/irc.e2e.test.ts', 'test/email.e2e.test.ts']) {
    it(`${file} fails at once, naming the install line, instead of hanging`, () => {
      const result = run(file, {});
      assert.notEqual(result.status, 0);
      assert.ok(result.ms < 20_000, `took ${result.ms} ms`);
      assert.match(String(result.stdout) + String(result.stderr), /apt-get install -y --no-install-recommends/);
    });
  }
});
