/** `[channels.matrix]`: the keys, their defaults and an example of each (errors quote it). */
import * as v from 'valibot';
import { policy, text } from '../../src/config/fields.ts';

export const MatrixSchema = v.pipe(
  v.strictObject({
    homeserver: v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://matrix.example.org'])),
    user_id: v.pipe(v.string(), v.regex(/^@[^:]+:\S+$/, 'a Matrix user id, @name:server'), v.examples(['@switchboard:example.org'])),
    access_token: v.optional(text('${MATRIX_ACCESS_TOKEN}')),
    password: v.optional(text('${MATRIX_PASSWORD}')),
    /** Rooms to join at start (ids or aliases); invites from allowed senders are accepted too. */
    rooms: v.optional(v.pipe(v.array(text('#general:example.org')), v.examples([['#general:example.org']])), []),
    ...policy,
  }),
  v.check((matrix) => matrix.access_token !== undefined || matrix.password !== undefined, 'needs access_token or password'),
);

/** The validated `[channels.matrix]` table, defaults filled in. */
export type MatrixConfig = v.InferOutput<typeof MatrixSchema>;
