/**
 * Making `client.destroy()` final. @discordjs/ws (1.2) reconnects a shard that was closed
 * while it waited 500 ms to reconnect: destroying it then finds it "idle", returns, and the
 * shard connects again afterwards — forever, with nobody listening. This happens whenever a
 * listen stops (or login fails) during a gateway outage. So once the manager is destroyed,
 * its shards' reconnect step becomes a no-op and a half-open socket is cut.
 *
 * This reaches into discord.js internals (`client.ws._ws.strategy.shards`); every step is
 * guarded, so a differently shaped version just leaves the behaviour as it was.
 */
import type { Client } from 'discord.js';

interface SocketLike {
  readonly readyState: number;
  on?(event: 'error', listener: () => void): unknown;
  terminate?(): void;
}

interface ShardLike {
  internalConnect?: () => Promise<void>;
  connection?: SocketLike | null;
}

interface StrategyLike {
  shards?: { values(): Iterable<ShardLike> };
  destroy?: (options?: unknown) => Promise<void>;
}

const CONNECTING = 0;

/** Call right after `client.login()` was called (the manager exists from then on). */
export function makeDestroyFinal(client: Client): void {
  const strategy = (client.ws as unknown as { _ws?: { strategy?: StrategyLike } | null })._ws?.strategy;
  const destroy = strategy?.destroy;
  if (!strategy || typeof destroy !== 'function' || !strategy.shards) return;
  strategy.destroy = async (options?: unknown): Promise<void> => {
    const shards = [...(strategy.shards?.values() ?? [])];
    for (const shard of shards) {
      if (typeof shard.internalConnect === 'function') shard.internalConnect = async () => undefined;
    }
    await destroy.call(strategy, options);
    for (const shard of shards) {
      const socket = shard.connection;
      if (socket && socket.readyState === CONNECTING && typeof socket.terminate === 'function') {
        socket.on?.('error', () => undefined); // aborting a handshake reports an error nobody listens to any more
        socket.terminate();
      }
    }
  };
}
