/**
 * `switchboard pairing list` / `switchboard pairing approve <channel> <code>`: the operator's
 * side of pairing. Works while the daemon runs (the database is in WAL mode).
 */
import type { Writable } from 'node:stream';
import type { PairingStore } from '../src/policy/access.ts';

export const pairingUsage = `Usage: switchboard pairing list
       switchboard pairing approve <channel> <code>

A stranger who writes to a channel without \`allow\` gets a one-time pairing code.
  list                       pending codes: channel, sender, code, age
  approve <channel> <code>   let that sender talk from now on (kept in the database)

Options:
  -c, --config FILE   config file (default: as for start)
  -h, --help          show this help
`;

export async function runPairingCommand(
  args: readonly string[],
  open: () => Promise<{ pairing: PairingStore; close(): Promise<void> }>,
  out: Writable,
  err: Writable,
  /** @default Date.now */
  now: () => number = Date.now,
): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === '--help' || sub === '-h' || sub === 'help') {
    out.write(pairingUsage);
    return 0;
  }
  const usage = (message: string): number => {
    err.write(`switchboard pairing: ${message}\n${pairingUsage}`);
    return 2;
  };
  if (sub === 'list' && rest.length > 0) return usage(`unexpected argument "${rest[0]}"`);
  if (sub === 'approve' && rest.length !== 2) return usage('approve needs a channel and a code, e.g. switchboard pairing approve telegram K7P2QX');
  if (sub !== 'list' && sub !== 'approve') return usage(sub === undefined ? 'missing subcommand' : `unknown subcommand "${sub}"`);
  const { pairing, close } = await open();
  try {
    if (sub === 'list') {
      const pending = await pairing.pending();
      if (pending.length === 0) {
        out.write('No pairing requests are waiting.\n');
        return 0;
      }
      out.write(table([['CHANNEL', 'SENDER', 'CODE', 'AGE'], ...pending.map((request) => [request.channel, request.senderId, request.code, age(now() - request.createdAt)])]));
      return 0;
    }
    const [channel, code] = rest as [string, string];
    const sender = await pairing.approve(channel, code);
    if (sender === undefined) {
      err.write(`switchboard pairing: no waiting request with code ${code} on channel ${channel} (codes expire after an hour; the sender gets a new one by writing again); see switchboard pairing list\n`);
      return 1;
    }
    out.write(`Approved ${sender} on ${channel}: their messages reach the agent from now on.\n`);
    return 0;
  } finally {
    await close();
  }
}

/** Columns padded to their widest cell, two spaces apart. */
function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n') + '\n';
}

/** "12 s", "4 min", "1 h 5 min": how long a code has been waiting (they expire after an hour). */
export function age(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
