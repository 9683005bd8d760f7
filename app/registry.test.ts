/**
 * The channel registry: one module per channel, in the order errors, onboard and doctor list
 * them; every module's table is in the config schema; and loading the registry (as every start
 * does, for the schema) loads no platform SDK — a module's code comes in with `import()`.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runModuleScript } from '../test/support/child.ts';
import * as v from 'valibot';
import { defineChannel } from '../src/channel-module.ts';
import { createConfigLoader } from '../src/config/load.ts';
import { configSchema, unwrap, type SchemaNode } from '../src/config/schema.ts';
import { channelModules, ConfigSchema } from './config.ts';

const root = join(import.meta.dirname, '..');

describe('the channel registry', () => {
  it('lists each channel once, in the order of the [channels.*] tables, each with its docs page', () => {
    const names = channelModules.map((module) => module.name);
    assert.deepEqual(names, ['terminal', 'telegram', 'discord', 'slack', 'matrix', 'irc', 'email', 'webhook']);
    for (const module of channelModules) assert.equal(module.docs, `docs/channels/${module.name}.md`);
  });

  it('gives the config schema every channel table, and only those', () => {
    const channels = unwrap(unwrap(ConfigSchema as unknown as SchemaNode).base.entries!.channels!).base.entries!;
    assert.deepEqual(Object.keys(channels), channelModules.map((module) => module.name));
    for (const module of channelModules) assert.equal(unwrap(channels[module.name]!).base, unwrap(module.schema as unknown as SchemaNode).base);
  });

  it('takes a new channel from its module alone: its table validates, with errors that name its keys', () => {
    const echo = defineChannel({
      name: 'echo',
      schema: v.strictObject({ prefix: v.optional(v.pipe(v.string(), v.examples(['echo: '])), 'echo: ') }),
      docs: 'docs/channels/echo.md',
      create: () => Promise.reject(new Error('not built here')),
      onboard: () => Promise.resolve({ lines: [], secrets: [] }),
    });
    const { parseConfig } = createConfigLoader(configSchema({ echo: echo.schema }));
    const minimal = '[provider]\nkind = "openai"\nmodel = "m"\n';
    assert.deepEqual(parseConfig(`${minimal}[channels.echo]\n`, 't', {}).channels, { echo: { prefix: 'echo: ' } });
    assert.throws(() => parseConfig(`${minimal}[channels.echo]\nprefx = "> "\n`, 't', {}), /channels\.echo\.prefx: unknown key; did you mean "prefix"\?/);
    assert.throws(() => parseConfig(`${minimal}[channels.telegram]\ntoken = "1:a"\n`, 't', {}), /channels\.telegram: unknown key/);
  });

  it('loads no platform SDK: each module imports its channel only when it is built', () => {
    const sdks = ['grammy', 'discord.js', '@slack/bolt', 'matrix-js-sdk', 'irc-framework', 'imapflow', 'nodemailer', 'mailparser'];
    const script = `
      import { registerHooks } from 'node:module';
      const seen = [];
      registerHooks({ resolve(specifier, context, next) { if (${JSON.stringify(sdks)}.some((sdk) => specifier === sdk || specifier.startsWith(sdk + '/'))) seen.push(specifier); return next(specifier, context); } });
      await import(${JSON.stringify(root)} + '/app/config.ts');
      const before = [...seen];
      await import(${JSON.stringify(root)} + '/channels/telegram/index.ts');
      process.stdout.write(JSON.stringify({ before, after: seen }));
    `;
    const out = runModuleScript<{ before: string[]; after: string[] }>(script, { cwd: root });
    assert.deepEqual(out.before, []);
    // The check is live: it does see an SDK when a channel's code is imported.
    assert.ok(out.after.includes('grammy'), JSON.stringify(out.after));
  });
});
