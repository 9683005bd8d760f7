/**
 * The Tool contract: schema first. Arguments are validated against `parameters` before
 * `execute` runs; a tool reports failure as an `error` result the model can correct from,
 * and must not throw (a throw is caught and turned into one anyway).
 */
import type { Logger } from 'pino';

/** What every tool call gets besides its arguments. */
export interface ToolContext {
  /** Conversation key of the turn. */
  readonly conversation: string;
  /** Platform id of the person whose message started the turn. */
  readonly senderId: string;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/**
 * - `ok`: text for the model (keep it to a few KB);
 * - `error`: a sentence the model can correct from;
 * - `effect`: a side effect only; the model is told it was done.
 */
export type ToolResult =
  | { readonly kind: 'ok'; readonly text: string }
  | { readonly kind: 'error'; readonly message: string }
  | { readonly kind: 'effect'; readonly summary?: string };

export interface Tool<Args = Record<string, unknown>> {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>;
  execute(args: Args, ctx: ToolContext): Promise<ToolResult>;
}

export const ok = (text: string): ToolResult => ({ kind: 'ok', text });
export const toolError = (message: string): ToolResult => ({ kind: 'error', message });
