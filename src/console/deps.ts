/**
 * What the web console reads and changes: the same runtime, stores and metrics the CLI uses,
 * handed in by the composition root (app/console.ts). No second source of truth: every read
 * goes to one of these per request.
 *
 * Every store method may be synchronous today and asynchronous tomorrow (the PostgreSQL
 * backend): the console awaits each call, so both work.
 */
import type { Logger } from 'pino';
import type { StatusReport } from '../runtime/status-report.ts';
import type { LogTail } from '../log.ts';
import type { Memory } from '../memory.ts';
import type { ActivityMinute, ToolCallRecord } from '../activity.ts';
import type { ConsoleQueries } from './queries.ts';
import type { TokenGuard } from '../http/token-guard.ts';

type MaybePromise<T> = T | Promise<T>;

/** A pairing code waiting for the operator. */
export interface PendingCode {
  readonly channel: string;
  readonly senderId: string;
  readonly code: string;
  readonly createdAt: number;
}

/** The pairing store as the console uses it (src/policy/access.ts PairingStore fits). */
export interface PairingPort {
  pending(): MaybePromise<readonly PendingCode[]>;
  /** The sender the code belonged to, or undefined. */
  approve(channel: string, code: string): MaybePromise<string | undefined>;
}

/** The approvals store as the console uses it (src/agent/approvals.ts ApprovalStore fits). */
export interface ApprovalsPort {
  clear(conversation: string): MaybePromise<void>;
}

/** What a config save or reload did (app/reload.ts ReloadResult). */
export type ReloadOutcome =
  | { readonly ok: true; readonly restarted: readonly string[]; readonly added: readonly string[]; readonly removed: readonly string[]; readonly agentRebuilt: boolean; readonly needsRestart: readonly string[] }
  | { readonly ok: false; readonly error: string };

/** The config file, for the Config page. */
export interface ConfigPort {
  /** The config file's path. */
  readonly file: string;
  /** Reads the file (secrets masked, see src/console/mask.ts). */
  read(): Promise<string>;
  /** Problems with `text` as the CLI would print them; empty when valid. */
  validate(text: string): Promise<string[]>;
  /** Validates, keeps the old file as `<file>.bak`, writes `text` and reloads. */
  save(text: string): Promise<{ problems: string[]; reload?: ReloadOutcome }>;
  /** Reloads the file as it is (the same as `switchboard reload`). */
  reload(): Promise<ReloadOutcome>;
  /** The effective config, secrets masked. */
  effective(): Promise<unknown>;
}

/** One event of the browser chat, sent to the operator's page over SSE. */
export type ChatEvent =
  | { readonly type: 'message'; readonly id: string; readonly text: string; readonly at: number }
  | { readonly type: 'draft'; readonly id: string; readonly text: string; readonly at: number }
  | {
      readonly type: 'file';
      readonly id: string;
      readonly name: string;
      readonly url: string;
      readonly at: number;
      /** Set when the file is a JPEG, PNG, GIF or WebP (by its bytes): the page shows it as a picture. */
      readonly image?: { readonly width: number; readonly height: number };
    };

/** A file the operator sends with a chat message. */
export interface ChatUpload {
  readonly name: string;
  readonly mime?: string;
  readonly data: Uint8Array;
}

/** The web channel (channels/web), as the console drives it. */
export interface ChatPort {
  /**
   * Pushes the operator's message into the runtime (like any channel's inbound message).
   * `clientId`, chosen by the page for this message and sent again with it when the post is
   * tried again, makes the retry the same message: one whose first post was stored though the
   * page was told it failed is not answered twice.
   */
  post(operator: string, text: string, files: readonly ChatUpload[], clientId?: string): Promise<{ id: string }>;
  /** Live events for one operator's conversation; returns the unsubscribe. */
  subscribe(operator: string, listener: (event: ChatEvent) => void): () => void;
  /** A file the agent sent to this operator, by id (undefined when unknown or not theirs). */
  /** A file sent to `operator`; `mime` set for an image (by its bytes), which the route serves as that type. */
  file(operator: string, id: string): { path: string; name: string; mime?: string } | undefined;
  /** The conversation key of an operator's chat. */
  conversation(operator: string): string;
}

/** The Overview page's numbers. */
export interface OverviewReport {
  readonly status: StatusReport;
  readonly model: string;
  readonly node: string;
  readonly activity: readonly ActivityMinute[];
}

/** A tool offered to the model. */
export interface ToolRow {
  readonly name: string;
  readonly description: string;
  readonly source: string;
}

/** The memories recalled for one turn (kept in process, the last few per conversation). */
export interface RecallRecord {
  readonly at: number;
  readonly query: string;
  readonly entries: ReadonlyArray<{ readonly id: string; readonly key: string; readonly content: string; readonly scope: string; readonly score?: number }>;
}

export interface ConsoleDeps {
  readonly log: Logger;
  /** The gateway token in force (undefined = none: loopback only, the console is open). Read per request. */
  token(): string | undefined;
  /** How long a sign-in lasts. */
  readonly sessionMs: number;
  /** Where the built front end is (dist/console). */
  readonly staticDir: string;
  /** Largest JSON body (bytes). @default 65536 */
  readonly maxJsonBytes?: number;
  /** Largest file of a chat message (bytes, decoded); a larger one is refused with 413. @default 8 MiB */
  readonly maxUploadBytes?: number;
  /**
   * Reverse proxies whose `X-Forwarded-For` names the client (`[gateway] trusted_proxies`:
   * addresses or CIDR ranges), for the sign-in limit. @default [] (the socket's address counts)
   */
  /** The gateway's token check (token-guard.ts): wrong tokens counted and limited with the gateway's routes. @default one of the console's own */
  readonly tokenGuard?: TokenGuard;
  readonly trustedProxies?: readonly string[];
  overview(): MaybePromise<OverviewReport>;
  /** Restarts a channel's listen; false when there is no such channel. */
  restartChannel(name: string): boolean;
  readonly queries: ConsoleQueries;
  readonly pairing?: PairingPort;
  readonly approvals: ApprovalsPort;
  /** `allow` of each configured chat channel (undefined = pairing). */
  allowLists(): Record<string, readonly string[] | undefined>;
  readonly memory?: Memory;
  tools(): readonly ToolRow[];
  /** Connected remote-tool clients. */
  remoteClients(): readonly string[];
  toolCalls(): readonly ToolCallRecord[];
  readonly logs?: LogTail;
  readonly config?: ConfigPort;
  readonly chat?: ChatPort;
  /** What automatic recall gave the model before each recent turn of a conversation. */
  recalls?(conversation: string): readonly RecallRecord[];
}
