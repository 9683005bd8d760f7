/**
 * `switchboard status [--json]`: asks the running daemon, through the gateway's
 * `/api/status`, how it is doing — channels, queue, turns in flight, uptime, totals.
 */
import type { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { StatusReport } from '../src/gateway/server.ts';

export const statusUsage = `Usage: switchboard status [--json]

Asks the running daemon (through the gateway, [gateway] listen) for its state.
  --json   print the daemon's answer as JSON
`;

/** Exit code when `[gateway]` is missing (EX_CONFIG, as for every config problem). */
const EXIT_CONFIG = 78;

export interface StatusDeps {
  /** The config's `[gateway]` section; undefined when there is none. */
  readonly gateway: { readonly listen: string; readonly token?: string | undefined } | undefined;
  readonly out: Writable;
  readonly err: Writable;
  /** How long to wait for the daemon. @default 5000 */
  readonly timeoutMs?: number;
  /** Injectable for tests. @default Date.now */
  readonly now?: () => number;
}

/** Runs `switchboard status`; returns the exit code (0 ok, 1 daemon unreachable or refused, 2 usage, 78 no gateway). */
export async function runStatus(args: readonly string[], deps: StatusDeps): Promise<number> {
  const { out, err } = deps;
  let json: boolean;
  try {
    const parsed = parseArgs({ args: [...args], strict: true, allowPositionals: false, options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
    if (parsed.values.help) {
      out.write(statusUsage);
      return 0;
    }
    json = parsed.values.json === true;
  } catch (error) {
    err.write(`switchboard status: ${error instanceof Error ? error.message : String(error)}\n${statusUsage}`);
    return 2;
  }
  const gateway = deps.gateway;
  if (!gateway) {
    err.write('switchboard status: the gateway is not configured, so the daemon cannot be asked. Add to the config and restart the daemon:\n  [gateway]\n  listen = "127.0.0.1:8787"\n');
    return EXIT_CONFIG;
  }
  const unresolved = /^\$\{([^}]*)\}$/.exec(gateway.token ?? '');
  if (unresolved) {
    err.write(`switchboard status: gateway.token reads ${unresolved[0]}, which is not set in this shell; export ${unresolved[1]} as the daemon has it\n`);
    return 1;
  }
  const url = statusUrl(gateway.listen);
  let response: Response;
  try {
    response = await fetch(url, {
      headers: gateway.token ? { authorization: `Bearer ${gateway.token}` } : {},
      signal: AbortSignal.timeout(deps.timeoutMs ?? 5000),
    });
  } catch (error) {
    err.write(`switchboard status: cannot reach the daemon at ${url} (${reason(error)}). Is it running? Start it with \`switchboard start\` or \`systemctl start switchboard\`.\n`);
    return 1;
  }
  const text = await response.text();
  if (response.status === 401) {
    err.write(`switchboard status: the daemon refused the token (401); gateway.token here must be the one the daemon runs with\n`);
    return 1;
  }
  let report: StatusReport;
  try {
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`);
    report = JSON.parse(text) as StatusReport;
    if (!Array.isArray(report.channels)) throw new Error('the answer has no channel list');
  } catch (error) {
    err.write(`switchboard status: ${url} did not answer like a Switchboard daemon (${reason(error)})\n`);
    return 1;
  }
  out.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatStatus(report, (deps.now ?? Date.now)()));
  return 0;
}

/** The URL of `/api/status` for a `listen` address; a wildcard bind is asked on loopback. */
export function statusUrl(listen: string): string {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(listen);
  if (!match) return `http://${listen}/api/status`;
  const v6 = match[1];
  const host = v6 !== undefined ? (v6 === '::' ? '[::1]' : `[${v6}]`) : match[2] === '0.0.0.0' ? '127.0.0.1' : match[2]!;
  return `http://${host}:${match[3]}/api/status`;
}

function reason(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause as { code?: string; message?: string } | undefined;
  if (error.name === 'TimeoutError') return 'no answer in time';
  return cause?.code ?? cause?.message ?? error.message;
}

/** The readable summary. */
export function formatStatus(report: StatusReport, now: number): string {
  const lines: string[] = [];
  const ago = (iso: string | undefined): string => (iso === undefined ? 'never' : `${duration(now - Date.parse(iso))} ago`);
  lines.push(`Switchboard${report.version ? ` ${report.version}` : ''} · pid ${report.pid} · up ${duration(report.uptimeSeconds * 1000)} (since ${report.startedAt})`);
  if (report.channels.length === 0) lines.push('Channels: none');
  else lines.push('Channels:');
  const width = Math.max(4, ...report.channels.map((channel) => channel.name.length));
  for (const channel of report.channels) {
    const mark = channel.state === 'running' ? '✓' : '✗';
    lines.push(
      `  ${mark} ${channel.name.padEnd(width)}  ${channel.state.padEnd(8)} for ${duration(now - Date.parse(channel.since)).padEnd(7)} · restarts ${channel.restarts} · last inbound ${ago(channel.lastInboundAt)}`,
    );
    if (channel.lastError !== undefined) lines.push(`    last error ${ago(channel.lastErrorAt)}: ${channel.lastError}`);
    for (const note of channel.notes ?? []) lines.push(`    note: ${note}`);
  }
  if (report.storage) lines.push(`✗ Disk full (${report.storage.code}) since ${report.storage.since}: new messages are refused (${count(report.storage.refused, 'write')} so far); free space in the data_dir`);
  lines.push(`Work: ${report.queued} queued${report.cluster ? ' (whole cluster)' : ''} · ${report.inFlight} in flight · ${count(report.pendingReplies, 'reply', 'replies')} waiting to be sent`);
  if (report.cluster) {
    lines.push(`Cluster (this node: ${report.cluster.node}):`);
    for (const node of report.cluster.nodes) {
      const held = node.channels.length > 0 ? `holds ${node.channels.join(', ')}` : 'holds no channel';
      lines.push(`  ${node.node}  ${node.alive ? 'alive' : 'gone '}  ${held} · ${node.inFlight} in flight · ${count(node.turns, 'turn')} · ${node.version}`);
    }
  }
  const t = report.totals;
  lines.push(`Since start: ${t.received} received · ${t.answered} answered · ${t.failed} failed · ${t.ignored} ignored · ${count(t.duplicates, 'duplicate')} · ${t.sent} sent`);
  return `${lines.join('\n')}\n`;
}

/** "1 turn", "2 turns", "0 replies". */
export function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function duration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours}h ${minutes % 60}m` : `${Math.floor(hours / 24)}d ${hours % 24}h`;
}
