/**
 * A channel as one unit (channels/<name>/module.ts): its `[channels.<name>]` schema, its
 * factory, its doctor probe, its onboard questions and its docs page. channels/registry.ts
 * lists the modules; the composition root (app/) is given that list and is the only place
 * that reads it — src/ knows this shape, never a channel.
 *
 * module.ts must stay light: the registry loads every module at start (for the config
 * schema), so `create`, `probe` and `onboard` import their code with `import()` — a
 * one-channel daemon loads its own SDK and no other.
 */
import type * as v from 'valibot';
import type { Channel, ChannelContext } from './channel.ts';
import type { Config } from './config/schema.ts';
import type { Logger } from './log.ts';
import type { ChannelTable, Prompt } from './setup/onboard.ts';
import type { CheckResult } from './setup/probe.ts';

/** What a channel factory gets besides its own config section. */
export interface ChannelDeps {
  /** The whole config (the terminal names the agent and the model in its banner). */
  readonly config: Config;
  readonly mode: 'start' | 'chat';
  readonly log: Logger;
  /** Ends a `chat` session once its input has ended and every reply is out; returns what to tell the person. */
  readonly finish: () => string | undefined;
  /** Ctrl-C at the terminal's prompt: the same as SIGINT; returns what to tell the person. */
  readonly interrupt: () => string | undefined;
  /** What every chat channel gets (see ChannelContext). */
  readonly context: ChannelContext;
}

export interface ChannelModule<N extends string = string, S extends v.GenericSchema = v.GenericSchema> {
  /** The `[channels.<name>]` key and the channel's name in logs, status and metrics. */
  readonly name: N;
  /** The table's schema (channels/<name>/config.ts); errors quote its examples. */
  readonly schema: S;
  /** The channel's page, from the repository root: docs/channels/<name>.md. */
  readonly docs: string;
  /** Builds the channel (importing its code, and its SDK, only now). */
  create(section: v.InferOutput<S>, deps: ChannelDeps): Promise<Channel>;
  /** `switchboard doctor`: the platform's cheapest identity call, with a deadline; never throws. Absent = nothing to check. */
  probe?(section: v.InferOutput<S>, timeoutMs: number): Promise<CheckResult[]>;
  /** `switchboard onboard`: asks what the table needs and who may talk. */
  onboard(ask: Prompt): Promise<ChannelTable>;
}

/** A module, with its name and schema types kept (the registry's config type is built from them). */
export function defineChannel<const N extends string, S extends v.GenericSchema>(module: ChannelModule<N, S>): ChannelModule<N, S> {
  return module;
}
