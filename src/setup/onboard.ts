/**
 * What each channel's onboard questions (channels/<name>/onboard.ts, its module's `onboard`)
 * are made of: the prompt they ask through, a secret read as the name of an environment
 * variable (the file reads "${NAME}"), `allow` and its absence, and a check of an answer
 * against the channel's own schema, so the file `switchboard onboard` writes validates.
 */
import * as v from 'valibot';
import { schemaAt } from '../config/schema.ts';

/** Questions on a terminal or a pipe (app/prompt.ts makes one). */
export interface Prompt {
  /** Asks until `check` accepts the answer; an empty answer is `fallback`. */
  text(question: string, fallback: string, check?: (answer: string) => string | undefined): Promise<string>;
  /** A comma-separated list (empty = `fallback`); `required` asks again until it has an item. */
  list(question: string, fallback: readonly string[], check?: (item: string) => string | undefined, required?: boolean): Promise<string[]>;
  /** yes / no. */
  yes(question: string, fallback: boolean): Promise<boolean>;
  /** Not echoed at a terminal. Empty is allowed (the caller decides what it means). */
  secret(question: string): Promise<string>;
  /** Stops reading (so the process can exit). */
  close(): void;
}

/** A secret the config reads from the environment, and where to get it. */
export interface Secret {
  readonly env: string;
  readonly hint: string;
}

/** One channel's part of the config, as its onboard questions answer it. */
export interface ChannelTable {
  /** The table's lines (keys and comments), without the [channels.X] header. */
  readonly lines: readonly string[];
  readonly secrets: readonly Secret[];
}

/** A check for the value at `path` under `schema` (its own description of a right value). */
export function field(schema: unknown, ...path: string[]): (answer: string) => string | undefined {
  const node = schemaAt(schema, path);
  return (answer) => {
    if (answer === '') return 'an answer is needed';
    if (!node) return undefined;
    const result = v.safeParse(node as unknown as v.GenericSchema, answer);
    if (result.success) return undefined;
    const issue = result.issues[0];
    return issue.type === 'regex' ? `must be ${issue.message}` : issue.message;
  };
}

/** An environment variable name, for "${NAME}". */
export const envName = (answer: string): string | undefined => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(answer) ? undefined : 'an environment variable name: letters, digits and _');

/** A TOML string. */
export const q = (value: string): string => JSON.stringify(value);
/** A TOML list of strings. */
export const list = (values: readonly string[]): string => `[${values.map(q).join(', ')}]`;

/** `allow = [...]`, or a comment saying what its absence means. */
export function allowLines(allow: readonly string[], example: string): string[] {
  if (allow.length > 0) return [`allow = ${list(allow)}`];
  return [`# allow = [${q(example)}]   # without allow, a stranger gets a pairing code: switchboard pairing approve …`];
}

export const allowQuestion = (who: string): string => `${who} who may talk, comma-separated (* = anyone; empty = strangers get a pairing code you approve)`;

/** Asks for the environment variable a secret is read from. */
export async function askSecret(ask: Prompt, question: string, fallback: string, hint: string): Promise<Secret> {
  return { env: await ask.text(question, fallback, envName), hint };
}
