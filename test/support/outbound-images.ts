/**
 * Outbound images end to end (issue 26, point 3): the real daemon, a scripted model that sends
 * workspace files with `send_file`, and a platform peer that records how each file arrived.
 * Each platform's test (test/<platform>-outbound-images.e2e.test.ts) says what its peer must
 * have recorded: a photo shown inline for an image, a file for a PDF.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import type { ChatPeer, Place } from '../contracts/chat-channel.ts';
import type { FakeOpenAI } from '../fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './cli.ts';
import { until } from './wait.ts';

export const dm: Place = { kind: 'dm', user: 'alice' };

/** A small opaque PNG (a chart, a screenshot). */
export const chartPng = (width = 64, height = 48): Promise<Buffer> =>
  sharp({ create: { width, height, channels: 3, background: { r: 200, g: 40, b: 40 } } }).png().toBuffer();

/** A PNG over 10 MB of bytes (noise, stored uncompressed) whose pixel size is ordinary (1900 × 1900). */
export const heavyPng = (): Promise<Buffer> =>
  sharp(randomBytes(1900 * 1900 * 3), { raw: { width: 1900, height: 1900, channels: 3 } }).png({ compressionLevel: 0 }).toBuffer();

/** A minimal one-page PDF (the bytes a report generator writes). */
export const pdf = Buffer.from('%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n');

export interface OutboundRun {
  /** The daemon's workspace (files the model may send). */
  readonly workspace: string;
  stop(): Promise<void>;
}

/** Starts the daemon on `peer`'s config with alice allowed. */
export async function startForPeer(peer: ChatPeer, model: FakeOpenAI, env: Record<string, string>): Promise<OutboundRun> {
  peer.reset();
  const config = tempConfig(model.baseUrl, `[log]\nformat = "json"\n${peer.configSection()}allow = ${JSON.stringify([peer.users.alice])}\n`);
  const daemon: Daemon = startDaemon(['start', '--config', config.file], { env });
  await daemon.waitFor(/"msg":"ready"/, 'stdout', 20_000);
  const workspace = join(config.dir, 'data', 'workspace');
  mkdirSync(join(workspace, 'out'), { recursive: true });
  return {
    workspace,
    async stop() {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
      config.cleanup();
    },
  };
}

/** Writes `files` into the workspace's out/ folder, has the model send each with send_file in one turn, and waits until the peer has them all. */
export async function modelSends(peer: ChatPeer, model: FakeOpenAI, run: OutboundRun, files: Readonly<Record<string, Uint8Array>>): Promise<void> {
  const before = peer.botFiles(dm).length;
  for (const [name, data] of Object.entries(files)) writeFileSync(join(run.workspace, 'out', name), data);
  model.script({ toolCalls: Object.keys(files).map((name) => ({ name: 'send_file', arguments: { path: `out/${name}` } })) }, { text: 'here they are' });
  await peer.post('alice', dm, 'send me the files');
  const count = Object.keys(files).length;
  await until(() => peer.botFiles(dm).length >= before + count, `${count} files from the bot`, 60_000, () => JSON.stringify(peer.botFiles(dm)));
}

/**
 * Uploads sorted by name: the agent runs the tool calls of one step in parallel
 * (src/agent/loop.ts), so files sent by calls of the same step may arrive in either order.
 */
export function byName<T>(items: readonly T[], name: (item: T) => string = (item) => (item as { name: string }).name): T[] {
  return [...items].sort((a, b) => name(a).localeCompare(name(b)));
}
