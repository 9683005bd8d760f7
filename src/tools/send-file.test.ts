import assert from 'node:assert/strict';
import { mkdtemp, realpath, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { testLogger } from '../../test/support/log.ts';
import { error, text } from '../../test/support/results.ts';
import { createSecurityPolicy } from '../security/policy.ts';
import type { OutboundFile } from '../channel.ts';
import type { ToolContext } from '../tool.ts';
import { createSendFileTool } from './send-file.ts';

describe('send_file', () => {
  let ws: string;
  before(async () => {
    ws = await realpath(await mkdtemp(join(tmpdir(), 'sb-send-file-')));
    await writeFile(join(ws, 'big.bin'), '');
    await truncate(join(ws, 'big.bin'), 10 * 1024 * 1024 + 1); // sparse: 10 MiB and one byte
    await writeFile(join(ws, 'small.txt'), 'hello\n');
  });
  after(() => rm(ws, { recursive: true, force: true }));

  const context = (channel: string, sent: OutboundFile[]): ToolContext => ({
    conversation: 'c', channel, senderId: 'u', workspace: ws, signal: new AbortController().signal, log: testLogger(), sendFile: (file) => void sent.push(file),
  });
  const tool = () => createSendFileTool(createSecurityPolicy({ workspace: ws, autonomy: 'full' }), { maxFileBytes: (channel) => (channel === 'discord' ? 10 * 1024 * 1024 : undefined) });

  it('tells the model a file over the channel’s own limit cannot be sent there, and queues nothing', async () => {
    const sent: OutboundFile[] = [];
    const message = error(await tool().execute({ path: 'big.bin' }, context('discord', sent)));
    assert.match(message, /"big\.bin" is 10 MB; discord accepts files up to 10 MB, so it cannot be sent here/);
    assert.match(message, /Tell the person/);
    assert.deepEqual(sent, []);
  });

  it('sends what fits, and a channel without a limit of its own takes the general one', async () => {
    const sent: OutboundFile[] = [];
    assert.match(text(await tool().execute({ path: 'small.txt' }, context('discord', sent))), /will be sent/);
    assert.match(text(await tool().execute({ path: 'big.bin' }, context('telegram', sent))), /will be sent/);
    assert.deepEqual(sent.map((file) => file.name), ['small.txt', 'big.bin']);
  });
});
