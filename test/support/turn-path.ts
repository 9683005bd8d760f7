/**
 * The whole turn path on one machine, for tests that follow a message from a channel's push to
 * the model and back: a memory channel, the runtime on a fresh SQLite file, and an agent with no
 * tools over the provider the test gives (the scripted model, with media decorators or not).
 */
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAgent, type AgentOptions } from '../../src/agent/agent.ts';
import { ApprovalStore } from '../../src/agent/approvals.ts';
import { createToolRunner } from '../../src/agent/tool-runner.ts';
import { createArgsValidator } from '../../src/agent/validate.ts';
import type { Attachment } from '../../src/channel.ts';
import type { Provider } from '../../src/provider.ts';
import { defaultSupervisorOptions } from '../../src/runtime/supervisor.ts';
import { Runtime } from '../../src/runtime/runtime.ts';
import { openDatabase } from '../../src/store/db.ts';
import type { Database } from '../../src/store/sql.ts';
import { sqliteDatabase } from '../../src/store/sqlite-sql.ts';
import { testLogger } from './log.ts';
import { createMemoryChannel, type MemoryChannel } from './memory-channel.ts';

/** Writes `bytes` where the attachment store would have saved a file of the memory channel, and describes it. */
export async function saveAttachment(workspace: string, id: string, name: string, bytes: Uint8Array, kind: Attachment['kind'], mime: string): Promise<Attachment> {
  const path = `inbox/mem/${id}/${name}`;
  await mkdir(join(workspace, 'inbox/mem', id), { recursive: true });
  await writeFile(join(workspace, path), bytes);
  return { kind, name, mime, size: bytes.length, path };
}

export interface TurnPathOptions {
  readonly workspace: string;
  /** Temporary folders to remove after the suite; the database's folder is added. */
  readonly dirs: string[];
  readonly provider: Provider;
  /** More agent options (transcription, …). */
  readonly agent?: Partial<AgentOptions>;
}

/** Starts the runtime (ready) with one memory channel. */
export async function startTurnPath(options: TurnPathOptions): Promise<{ channel: MemoryChannel; runtime: Runtime; database: Database }> {
  const dir = await mkdtemp(join(tmpdir(), 'sb-turn-db-'));
  options.dirs.push(dir);
  const database = sqliteDatabase(openDatabase(join(dir, 'db.sqlite')));
  const agent = createAgent({
    provider: options.provider,
    runner: createToolRunner({ tools: [], validator: createArgsValidator(), decide: () => ({ kind: 'allow' }), alwaysApproved: async () => false, timeoutMs: 1000 }),
    approvals: new ApprovalStore(database),
    name: 'Bot',
    instructions: '',
    workspace: options.workspace,
    maxToolIterations: 3,
    toolCalling: 'native',
    ...options.agent,
  });
  const channel = createMemoryChannel();
  const runtime = new Runtime({
    database,
    log: testLogger(),
    channels: [channel],
    agent,
    historyTurns: 50,
    maxInFlight: 4,
    maxQueued: 100,
    turnTimeoutMs: 20_000,
    shutdownGraceMs: 1000,
    supervisor: defaultSupervisorOptions,
    delivery: { attemptsPerRound: 3, initialBackoffMs: 5, maxBackoffMs: 20 },
  });
  await runtime.start();
  await runtime.ready;
  return { channel, runtime, database };
}
