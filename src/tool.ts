/**
 * The Tool contract: schema first. Arguments are validated against `parameters` before
 * `execute` runs; a tool reports failure as an `error` result the model can correct from,
 * and must not throw (a throw is caught and turned into one anyway).
 */
import type { Logger } from 'pino';
import type { OutboundFile } from './channel.ts';

/** What every tool call gets besides its arguments. */
export interface ToolContext {
  /** Conversation key of the turn. */
  readonly conversation: string;
  /** Channel instance the turn came from. */
  readonly channel: string;
  /** Platform id of the person whose message started the turn. */
  readonly senderId: string;
  /** Absolute, real path of the workspace; file tools resolve every path inside it. */
  readonly workspace: string;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** Sends a workspace file to the conversation with the turn's reply (absent where a turn cannot, e.g. a sub-agent). */
  readonly sendFile?: (file: OutboundFile) => void;
}

/**
 * - `ok`: text for the model (keep it to a few KB; the agent offloads larger text to a file);
 * - `error`: a sentence the model can correct from;
 * - `effect`: a side effect only; nothing is written to the conversation but an acknowledgement.
 */
export type ToolResult =
  | { readonly kind: 'ok'; readonly text: string }
  | { readonly kind: 'error'; readonly message: string }
  | { readonly kind: 'effect'; readonly summary?: string };

/** How risky a call is: low runs, medium asks in supervised mode, high only runs in full autonomy. */
export type Risk = 'low' | 'medium' | 'high';

/** What a call would do, judged before it runs (for the autonomy policy and approvals). */
export interface ToolAssessment {
  readonly risk: Risk;
  /** Changes something (a file, the outside world): refused in read-only autonomy. */
  readonly mutates: boolean;
  /** One line a person can approve, e.g. "shell: git pull". Also the key "always" remembers. */
  readonly summary: string;
}

export interface Tool<Args = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>;
  /** Longest a call may run, when it differs from the agent's per-call default (e.g. a sub-agent). */
  readonly timeoutMs?: number;
  /** Judges a call before it runs. Without it a call is low-risk and read-only. */
  assess?(args: Args, ctx: ToolContext): ToolAssessment;
  execute(args: Args, ctx: ToolContext): Promise<ToolResult>;
}

export const ok = (text: string): ToolResult => ({ kind: 'ok', text });
export const toolError = (message: string): ToolResult => ({ kind: 'error', message });
