/** Helpers for channel adapters' listen loops. */
import type { ListenLink } from './channel.ts';

/**
 * Runs `work` (a push waiting on backpressure, a file download) while telling the watchdog
 * the channel is alive: the connection is fine, the runtime is just busy.
 */
export async function whileAlive<T>(link: ListenLink, livenessMs: number, work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => link.alive(), Math.max(50, Math.floor(livenessMs / 3)));
  try {
    return await work();
  } finally {
    clearInterval(timer);
    link.alive();
  }
}
