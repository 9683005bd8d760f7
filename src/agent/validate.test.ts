import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { ok, type Tool } from '../tool.ts';
import { createArgsValidator } from './validate.ts';

const toolWith = (name: string, parameters: Tool['parameters']): Tool => ({ name, description: name, parameters, execute: () => Promise.resolve(ok('')) });
const schema = (field: string): Tool['parameters'] => ({ type: 'object', properties: { [field]: { type: 'string' } }, required: [field], additionalProperties: false });

describe('args validator', () => {
  it('names what is wrong, and compiles a shared schema once', async () => {
    const validator = createArgsValidator();
    const shared = schema('path');
    const a = toolWith('a', shared);
    const b = toolWith('b', shared);
    assert.equal(await validator.validate(a, { path: 'x' }), undefined);
    assert.equal(await validator.validate(b, {}), 'Invalid arguments for b: missing required argument "path".');
    assert.equal(await validator.validate(a, { path: 'x', more: 1 }), 'Invalid arguments for a: unknown argument "more".');
    assert.equal(validator.compiled, 1);
  });

  it('keeps at most maxSchemas compiled however many tools come and go, and still checks each', async () => {
    const validator = createArgsValidator({ maxSchemas: 20 });
    for (let i = 0; i < 300; i++) {
      // a reconnecting remote client: a new tool with a schema of its own each time
      const tool = toolWith(`t${i}`, schema(`f${i}`));
      assert.equal(await validator.validate(tool, { [`f${i}`]: 'v' }), undefined);
      assert.ok(validator.compiled <= 20, `${validator.compiled} compiled after ${i + 1} tools`);
    }
    const old = toolWith('again', schema('f0'));
    assert.match((await validator.validate(old, {}))!, /missing required argument "f0"/);
  });

  it('enforces format: uri, email and date-time reject a bad value and name the format', async () => {
    const validator = createArgsValidator();
    const tool = toolWith('book', {
      type: 'object',
      properties: { link: { type: 'string', format: 'uri' }, to: { type: 'string', format: 'email' }, at: { type: 'string', format: 'date-time' } },
      additionalProperties: false,
    });
    assert.equal(await validator.validate(tool, { link: 'https://example.org/a?b=c', to: 'ann@example.org', at: '2026-11-23T13:00:00+01:00' }), undefined);
    assert.equal(await validator.validate(tool, { link: 'not a link' }), 'Invalid arguments for book: link must be a valid uri, like "https://example.com/page".');
    assert.equal(await validator.validate(tool, { to: 'ann at example' }), 'Invalid arguments for book: to must be a valid email, like "name@example.com".');
    assert.equal(await validator.validate(tool, { at: 'tomorrow 9am' }), 'Invalid arguments for book: at must be a valid date-time, like "2026-01-31T09:30:00Z".');
    assert.equal(
      await validator.validate(tool, { link: 'x', to: 'y', at: 'z' }),
      'Invalid arguments for book: link must be a valid uri, like "https://example.com/page"; to must be a valid email, like "name@example.com"; at must be a valid date-time, like "2026-01-31T09:30:00Z".',
    );
  });

  it("sends Ajv's warnings (an unknown format) to the pino logger", async () => {
    const lines: Array<{ level: number; msg: string }> = [];
    const sink = new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string }), done()) });
    const validator = createArgsValidator({ log: pino({ level: 'debug' }, sink) });
    const tool = toolWith('odd', { type: 'object', properties: { v: { type: 'string', format: 'x-made-up' } } });
    assert.equal(await validator.validate(tool, { v: 'anything' }), undefined); // an unknown format is ignored, not a failure
    // (Ajv warns once per place it generates code for the keyword: twice here.)
    assert.ok(lines.length >= 1);
    for (const { level, msg } of lines) assert.deepEqual({ level, msg }, { level: 40, msg: 'unknown format "x-made-up" ignored in schema at path "#/properties/v"' });
  });

  it('prints nothing to stdout or stderr, with or without a logger', async () => {
    // A child process, so that anything Ajv writes to the console is seen whatever the test runner does with its own.
    const module = fileURLToPath(new URL('./validate.ts', import.meta.url));
    const script = `
      const { createArgsValidator } = await import(${JSON.stringify(module)});
      const tool = { name: 't', description: 't', parameters: { type: 'object', properties: { a: { type: 'string', format: 'x-made-up' }, b: { type: 'string', format: 'uri' } }, madeUpKeyword: 1 }, execute: async () => ({}) };
      for (const validator of [createArgsValidator(), createArgsValidator({ log: (await import('pino')).pino({ level: 'silent' }) })]) {
        if (await validator.validate(tool, { a: 'x', b: 'https://example.org' }) !== undefined) process.exit(3);
        if (await validator.validate(tool, { b: 'nope' }) === undefined) process.exit(4);
      }`;
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: fileURLToPath(new URL('.', import.meta.url)) });
    assert.equal(stdout, '');
    assert.equal(stderr, '');
  });

  it('refuses a bad maxSchemas', () => {
    assert.throws(() => createArgsValidator({ maxSchemas: 0 }), /maxSchemas/);
  });
});
