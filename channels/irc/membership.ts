/**
 * The channels an IRC session joins by config and the ones it is in right now: joined, given up
 * on (the server refused the join), left, kicked. The session decides when to rejoin and when
 * it is ready; this keeps the sets, compared in IRC's case folding.
 */
import { ircLower, sameNick } from './inbound.ts';

/** Channel names and keys from config entries like "#chan key". */
export function parseChannels(entries: readonly string[]): Array<{ name: string; key?: string }> {
  return entries.map((entry) => {
    const [name, key] = entry.trim().split(/\s+/, 2);
    return key ? { name: name!, key } : { name: name! };
  });
}

export class Membership {
  /** The configured channels, in config order. */
  readonly wanted: ReadonlyArray<{ readonly name: string; readonly key?: string }>;
  readonly #joined = new Set<string>();
  readonly #failed = new Set<string>();

  constructor(entries: readonly string[]) {
    this.wanted = parseChannels(entries);
  }

  /** Whether we are in `channel` right now. */
  has(channel: string): boolean {
    return this.#joined.has(ircLower(channel));
  }

  /** The configured entry of `channel` (so it is rejoined after a kick), if it is one. */
  entry(channel: string): { readonly name: string; readonly key?: string } | undefined {
    return this.wanted.find((c) => sameNick(c.name, channel));
  }

  joined(channel: string): void {
    this.#joined.add(ircLower(channel));
    this.#failed.delete(ircLower(channel));
  }

  failed(channel: string): void {
    this.#failed.add(ircLower(channel));
  }

  left(channel: string): void {
    this.#joined.delete(ircLower(channel));
  }

  /** Every configured channel joined or given up on. */
  settled(): boolean {
    return this.wanted.every((c) => this.has(c.name) || this.#failed.has(ircLower(c.name)));
  }

  /** The configured channels we are not in. */
  missing(): string[] {
    return this.wanted.filter((c) => !this.has(c.name)).map((c) => c.name);
  }
}
