/**
 * A payload from outside (a platform update, a sync response, a frame) that lacks a field the
 * adapter reads, or carries it with the wrong type. Parsers throw it instead of tripping over
 * the field later (a TypeError deep inside); the channel logs it and skips the payload.
 */
export class MalformedPayload extends Error {
  /** Where in the payload, e.g. "message.chat.id". */
  readonly field: string;

  constructor(field: string, problem: string) {
    super(`malformed payload: ${field} ${problem}`);
    this.name = 'MalformedPayload';
    this.field = field;
  }
}

/** A plain object (not null, not an array). */
export const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Checks `value` against a shape of `typeof` names ("string", "number", "boolean", "object",
 * "array", or several joined by "|"); `?` at the end of a key makes it optional (undefined
 * passes). Throws {@link MalformedPayload} naming the first field that does not fit.
 *
 * @example expectShape(msg, 'message', { message_id: 'number', 'text?': 'string' })
 */
export function expectShape(value: unknown, where: string, shape: Readonly<Record<string, string>>): Record<string, unknown> {
  if (!isRecord(value)) throw new MalformedPayload(where, `must be an object, got ${kindOf(value)}`);
  for (const [rawKey, types] of Object.entries(shape)) {
    const optional = rawKey.endsWith('?');
    const key = optional ? rawKey.slice(0, -1) : rawKey;
    const field = value[key];
    if (field === undefined && optional) continue;
    if (!types.split('|').includes(kindOf(field))) throw new MalformedPayload(`${where}.${key}`, `must be ${types.replace(/\|/g, ' or ')}, got ${kindOf(field)}`);
  }
  return value;
}

/** `typeof`, with "null" and "array" told apart from "object". */
export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
