import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cleanEnv, passthroughProblem, redactSecrets, secretValues } from './env.ts';

const source = {
  PATH: '/usr/bin:/bin',
  HOME: '/home/daemon',
  LANG: 'C.UTF-8',
  TZ: 'UTC',
  OPENAI_API_KEY: 'sk-test-12345678',
  TELEGRAM_BOT_TOKEN: 'tok-12345678',
  DB_PASSWORD: 'hunter2hunter2',
  AWS_SECRET_ACCESS_KEY: 'aws-12345678',
  GOPATH: '/go',
  RANDOM_THING: 'x',
};

describe('cleanEnv', () => {
  it('keeps only the base names, with HOME set to the workspace and TERM defaulted', () => {
    assert.deepEqual(cleanEnv([], source, '/srv/ws'), { PATH: '/usr/bin:/bin', HOME: '/srv/ws', LANG: 'C.UTF-8', TZ: 'UTC', TERM: 'dumb' });
  });

  it('adds passthrough names but never secret-looking ones', () => {
    const env = cleanEnv(['GOPATH', 'OPENAI_API_KEY', 'DB_PASSWORD', 'missing', 'BAD-NAME'], source, '/srv/ws');
    assert.equal(env.GOPATH, '/go');
    assert.equal(env.OPENAI_API_KEY, undefined);
    assert.equal(env.DB_PASSWORD, undefined);
    assert.equal('missing' in env, false);
    assert.equal(Object.values(env).some((v) => v.includes('12345678')), false);
  });

  it('keeps the source HOME when no workspace is given', () => {
    assert.equal(cleanEnv([], source, undefined).HOME, '/home/daemon');
  });
});

describe('secrets', () => {
  it('finds secret values and redacts them', () => {
    const secrets = secretValues(source);
    assert.deepEqual(secrets.sort(), ['aws-12345678', 'hunter2hunter2', 'sk-test-12345678', 'tok-12345678']);
    assert.equal(redactSecrets('key=sk-test-12345678 pw=hunter2hunter2', secrets), 'key=[redacted] pw=[redacted]');
  });

  it('explains why a passthrough name is refused', () => {
    assert.match(passthroughProblem('GITHUB_TOKEN') ?? '', /looks like a secret/);
    assert.match(passthroughProblem('1X') ?? '', /not a valid/);
    assert.equal(passthroughProblem('GOPATH'), undefined);
  });
});
