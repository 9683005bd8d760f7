import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { createLogger, redactPaths } from './log.ts';

function capture(): { stream: Writable; lines: () => Array<Record<string, unknown>> } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      text += chunk.toString('utf8');
      callback();
    },
  });
  return { stream, lines: () => text.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('logger', () => {
  it('writes JSON lines and redacts secrets wherever they sit', () => {
    const { stream, lines } = capture();
    const log = createLogger({ level: 'info', format: 'json', stream });
    log.child({ channel: 'terminal' }).info({ provider: { api_key: 'sk-live', model: 'm' }, token: 't0k', headers: { authorization: 'Bearer x' }, deep: { a: { password: 'p' } } }, 'hello');
    const [line] = lines();
    assert.equal(line!.msg, 'hello');
    assert.equal(line!.channel, 'terminal');
    assert.deepEqual(line!.provider, { api_key: '[redacted]', model: 'm' });
    assert.equal(line!.token, '[redacted]');
    assert.deepEqual(line!.headers, { authorization: '[redacted]' });
    assert.deepEqual(line!.deep, { a: { password: '[redacted]' } });
  });

  it('writes every value as pino with its redaction does, strings, numbers and booleans without running the redactor on them', () => {
    const raw = (): { stream: Writable; text: () => string } => {
      let text = '';
      const stream = new Writable({ write: (chunk: Buffer, _encoding, callback) => ((text += chunk.toString('utf8')), callback()) });
      return { stream, text: () => text.replace(/"time":\d+/g, '"time":0') };
    };
    const ours = raw();
    const theirs = raw();
    const loggers = [
      createLogger({ level: 'info', format: 'json', stream: ours.stream }),
      pino({ level: 'info', base: { pid: process.pid }, redact: { paths: redactPaths, censor: '[redacted]' }, serializers: { err: pino.stdSerializers.err } }, theirs.stream),
    ];
    for (const log of loggers) {
      const child = log.child({ channel: 'webhook', conversation: 'webhook:webhook:a "quoted"\nline \u2028 é 😀', seq: 7, on: true, nan: Number.NaN, big: 2 ** 60, neg: -0 });
      child.info({ ms: 12.5, inf: Number.POSITIVE_INFINITY, text: '\u0000\u001f\ud800 lone', flag: false, nothing: null, gone: undefined, token: 'x', list: [1, { password: 'p' }], nested: { a: { secret: 's', b: 1 } } }, 'turn done %s');
      child.warn({ err: Object.assign(new Error('boom'), { apiKey: 'k' }) }, 'failed');
      log.info('plain');
    }
    const stack = /"stack":"(?:[^"\\]|\\.)*"/g; // where each logger was called from differs
    assert.equal(ours.text().replace(stack, ''), theirs.text().replace(stack, ''));
    assert.match(ours.text(), /"apiKey":"\[redacted\]"/);
  });

  it('respects the level and serialises errors with their stack', () => {
    const { stream, lines } = capture();
    const log = createLogger({ level: 'warn', format: 'json', stream });
    log.info('hidden');
    log.error({ err: new Error('boom') }, 'failed');
    const all = lines();
    assert.equal(all.length, 1);
    assert.equal((all[0]!.err as { message: string }).message, 'boom');
    assert.match((all[0]!.err as { stack: string }).stack, /Error: boom/);
  });

  it('writes readable lines in pretty mode', () => {
    let text = '';
    const stream = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        text += chunk.toString('utf8');
        callback();
      },
    });
    createLogger({ level: 'info', format: 'pretty', stream }).info({ api_key: 'sk-live' }, 'hello there');
    assert.match(text, /INFO.*hello there/);
    assert.doesNotMatch(text, /sk-live/);
    assert.doesNotMatch(text, /^\{/);
  });
});

describe('createLogTail (the console’s live log)', () => {
  it('gets every line the log writes, redacted as in the file, and keeps the last ones', async () => {
    const { createLogTail } = await import('./log.ts');
    const tail = createLogTail(3);
    const seen: string[] = [];
    tail.subscribe((line) => seen.push(line.msg));
    const log = createLogger({ level: 'info', format: 'json', stream: capture().stream, tap: tail });
    log.child({ channel: 'irc' }).info({ token: 'hunter2' }, 'one');
    log.debug('below the level');
    for (const msg of ['two', 'three', 'four']) log.warn(msg);
    assert.deepEqual(seen, ['one', 'two', 'three', 'four']);
    const lines = tail.lines();
    assert.deepEqual(lines.map((l) => l.msg), ['two', 'three', 'four']);
    assert.equal(lines[0]?.level, 40);
  });

  it('redacts secrets in the tailed line', async () => {
    const { createLogTail } = await import('./log.ts');
    const tail = createLogTail();
    createLogger({ level: 'info', format: 'json', stream: capture().stream, tap: tail }).child({ channel: 'irc' }).info({ token: 'hunter2' }, 'one');
    const [line] = tail.lines();
    assert.equal(line?.channel, 'irc');
    assert.ok(!line?.line.includes('hunter2'));
    assert.match(line?.line ?? '', /\[redacted\]/);
  });
});
