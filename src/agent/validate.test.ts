import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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

  it('refuses a bad maxSchemas', () => {
    assert.throws(() => createArgsValidator({ maxSchemas: 0 }), /maxSchemas/);
  });
});
