/** An in-memory channel for runtime tests: `inject` plays a platform, `sent` records replies. */
import { SendError, type Channel, type InboundMessage, type ListenLink, type OutboundMessage, type Push, type PushResult } from '../../src/channel.ts';

export interface MemoryChannel extends Channel {
  readonly sent: OutboundMessage[];
  /** Pushes a message as the platform would; resolves with what the runtime did. */
  inject(message: Partial<InboundMessage> & { id: string; text: string }): Promise<PushResult>;
  /** The next `n` sends fail (with `retryAfterMs` / `permanent` if given). */
  failNext(n: number, options?: { retryAfterMs?: number; permanent?: boolean }): void;
  /** Resolves when `n` replies have been sent in total. */
  waitForSent(n: number): Promise<void>;
  readonly sendAttempts: number;
}

export function createMemoryChannel(name = 'mem'): MemoryChannel {
  let push: Push | undefined;
  let failures = 0;
  let failure: { retryAfterMs?: number; permanent?: boolean } = {};
  let attempts = 0;
  const sent: OutboundMessage[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const pushReady: Array<() => void> = [];

  return {
    name,
    sent,
    get sendAttempts() {
      return attempts;
    },
    async listen(p: Push, signal: AbortSignal, link: ListenLink) {
      push = p;
      link.ready();
      for (const resolve of pushReady.splice(0)) resolve();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      push = undefined;
    },
    async send(message: OutboundMessage) {
      attempts++;
      if (failures > 0) {
        failures--;
        throw new SendError('scripted send failure', failure);
      }
      sent.push(message);
      for (const waiter of waiters.filter((w) => sent.length >= w.n)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    },
    async inject(partial) {
      if (!push) await new Promise<void>((resolve) => pushReady.push(resolve));
      return push!({ channel: name, account: 'acct', chat: 'chat1', sender: { id: 'user1', name: 'User One' }, timestamp: Date.now(), ...partial });
    },
    failNext(n, options = {}) {
      failures = n;
      failure = options;
    },
    waitForSent(n) {
      return sent.length >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }));
    },
  };
}
