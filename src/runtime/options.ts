/** What the runtime is given, what it reports, and what a reload may change (see runtime.ts). */
import type { Logger } from 'pino';
import type { Channel } from '../channel.ts';
import type { CommandDeps } from '../policy/commands.ts';
import type { PairingStore } from '../policy/access.ts';
import type { TurnHandler } from '../agent/agent.ts';
import type { Clock } from '../clock.ts';
import type { Database } from '../store/sql.ts';
import type { StorageHealth, StorageState } from '../store/storage.ts';
import type { DeliveryOptions } from './delivery.ts';
import type { ReplyRoute } from './reply-route.ts';
import type { ChannelHealth, SupervisorOptions } from './supervisor.ts';
import type { TurnQueue } from './turn-queue.ts';

/**
 * What a config reload may change while the runtime runs (see `Runtime.reconfigure`).
 * A turn reads these when it starts, so a turn already running finishes with the old ones.
 */
export interface RuntimeSettings {
  readonly agent: TurnHandler;
  readonly historyTurns: number;
  readonly turnTimeoutMs: number;
  readonly policies?: ReadonlyMap<string, ChannelPolicy>;
  readonly commands?: Omit<CommandDeps, 'status' | 'clearHistory'>;
}

export interface RuntimeOptions {
  /** Where the inbox, outbox, history and drafts live (SQLite or PostgreSQL: the runtime does not care which). */
  readonly database: Database;
  readonly log: Logger;
  readonly channels: readonly Channel[];
  readonly agent: TurnHandler;
  /** Turns of history given to the model. */
  readonly historyTurns: number;
  /** Turns running at once (of the default queue). */
  readonly maxInFlight: number;
  /** Messages waiting in memory before `push` waits (of the default queue). */
  readonly maxQueued: number;
  /** A turn taking longer is cut off and answered with an apology. */
  readonly turnTimeoutMs: number;
  /** How long in-flight turns may take to finish on shutdown. */
  readonly shutdownGraceMs: number;
  readonly supervisor: SupervisorOptions;
  readonly delivery: DeliveryOptions;
  /** Finished inbox/outbox rows are kept this long (the redelivery window). @default 7 days */
  readonly retentionMs?: number;
  /** How often unsent replies are retried. @default 30000 */
  readonly sweepIntervalMs?: number;
  /**
   * The conversation policy per chat channel (access, mention gating, streaming). A channel
   * without an entry (the terminal) is exempt: everything it pushes is answered (chat commands still apply).
   */
  readonly policies?: ReadonlyMap<string, ChannelPolicy>;
  /** Pairing codes and approved senders (required when a policy has no `allow`). */
  readonly pairing?: PairingStore;
  /** Chat commands (/new, /model, /status, /help) on every channel; omitted = commands go to the model. */
  readonly commands?: Omit<CommandDeps, 'status' | 'clearHistory'>;
  /** Told what happens, for metrics. Hooks must be cheap and must not throw. */
  readonly events?: RuntimeEvents;
  /** Where failed writes (a full disk) are reported; shared with the channels. @default one without a probe */
  readonly storage?: StorageHealth;
  /** Turn and shutdown durations and the uptime run on its monotonic clock; retention on its wall clock. @default systemClock */
  readonly clock?: Clock;
  /**
   * Where accepted turns wait and which worker runs them (the composition root picks: the local
   * queue, or pg-boss in a cluster, whose `channels` start empty — each is added when this node
   * takes its lease). @default a local queue of `maxInFlight` and `maxQueued`
   */
  readonly queue?: TurnQueue;
  /** Which node sends a recorded reply. @default this one (`localReplies`) */
  readonly replies?: ReplyRoute;
}

/** What the runtime reports as it works (see src/metrics.ts). */
export interface RuntimeEvents {
  /** A new (not redelivered) message was accepted into the inbox. */
  onReceived?(channel: string): void;
  /** A reply message reached the platform. */
  onSent?(channel: string): void;
  /** A turn through the model ended: its reply (or apology) is recorded. */
  onTurn?(channel: string, ms: number, outcome: 'answered' | 'failed'): void;
  /** A channel's listener is being restarted after a failure. */
  onRestart?(channel: string): void;
}

export interface ChannelPolicy {
  /** Sender ids let through; ["*"] = anyone; undefined = pairing. */
  readonly allow?: readonly string[];
  readonly mentionOnly: boolean;
  /** Stream the reply into a growing message (channels that can edit). */
  readonly stream: boolean;
}

export interface RuntimeCounters {
  received: number;
  duplicates: number;
  answered: number;
  failed: number;
  /** Left unanswered by the policy (denied, awaiting pairing, not addressed). */
  ignored: number;
  sent: number;
}

export interface RuntimeHealth {
  readonly channels: readonly ChannelHealth[];
  readonly queued: number;
  readonly inFlight: number;
  readonly pendingReplies: number;
  readonly counters: Readonly<RuntimeCounters>;
  /** Whether the data_dir takes writes (not: its disk is full). Omitted = writable. */
  readonly storage?: StorageState;
}
