/**
 * What `switchboard onboard` asks for each channel — each channel's own questions (its
 * module's `onboard`, channels/<name>/onboard.ts) — and the TOML it writes. Answers are checked
 * against the config schema as they are given, so the written file validates.
 */
import { field as fieldIn, type ChannelTable } from '../src/setup/onboard.ts';
import { channelModule, channelModules, ConfigSchema, type ChannelName } from './config.ts';
import type { Prompt } from './prompt.ts';

export { envName, type Secret } from '../src/setup/onboard.ts';
export type { ChannelName } from './config.ts';

/** The channels onboard offers, in the registry's order. */
export const channelNames: readonly ChannelName[] = channelModules.map((module) => module.name);

/** One channel's part of the config. */
export interface ChannelAnswers extends ChannelTable {
  readonly name: ChannelName;
}

/** A check for the value at `path` (from the top of the file), from the config schema. */
export function field(...path: string[]): (answer: string) => string | undefined {
  return fieldIn(ConfigSchema, ...path);
}

/** Asks what `name` needs; returns its table. */
export async function askChannel(name: ChannelName, ask: Prompt): Promise<ChannelAnswers> {
  return { name, ...(await channelModule(name)!.onboard(ask)) };
}
