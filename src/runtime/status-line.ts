/** The answer to the /status chat command: one line on how the runtime is doing. */
import type { RuntimeHealth } from './options.ts';

export function statusLine(health: RuntimeHealth, uptimeMs: number): string {
  const channels = health.channels.map((c) => `${c.name} ${c.state}${c.notes?.length ? ` (${c.notes.join('; ')})` : ''}`).join(', ');
  return `Up ${formatDuration(uptimeMs)} and running · channels: ${channels || 'none'} · ${health.inFlight} in flight, ${health.queued} queued · ${health.counters.answered} answered since start`;
}

function formatDuration(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 1) return `${Math.max(1, Math.round(ms / 1000))}s`;
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours}h ${minutes % 60}m` : `${Math.floor(hours / 24)}d ${hours % 24}h`;
}
