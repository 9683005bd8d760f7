/** A console's dependencies with nothing behind them (empty lists, one idle node): tests override what they drive. */
import { tmpdir } from 'node:os';
import pino from 'pino';
import type { ConsoleDeps } from '../../src/console/deps.ts';

export function fakeConsoleDeps(token: string, overrides: Partial<ConsoleDeps> = {}): ConsoleDeps {
  return {
    log: pino({ level: 'silent' }),
    token: () => token,
    sessionMs: 60_000,
    staticDir: tmpdir(),
    overview: () => ({ status: { pid: 1, startedAt: new Date(0).toISOString(), uptimeSeconds: 1, channels: [], queued: 0, inFlight: 0, pendingReplies: 0, totals: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } }, model: 'm', node: 'n', activity: [] }),
    restartChannel: () => false,
    queries: { conversations: async () => [], search: async () => [], transcript: async () => [], chat: async () => [], pendingApprovals: async () => [], approvedSenders: async () => [], revokeSender: async () => false, denyCode: async () => false },
    approvals: { clear: () => undefined },
    allowLists: () => ({}),
    tools: () => [],
    remoteClients: () => [],
    toolCalls: () => [],
    ...overrides,
  };
}
