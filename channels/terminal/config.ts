/** `[channels.terminal]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { text } from '../../src/config/fields.ts';

export const TerminalSchema = v.strictObject({
  user: v.optional(text('alice')),
});

/** The validated `[channels.terminal]` table, defaults filled in. */
export type TerminalConfig = v.InferOutput<typeof TerminalSchema>;
