/**
 * The key distribution part of a Matrix homeserver, as the client-server API specifies it
 * (matrix-org/matrix-spec data/api/client-server/keys.yaml, to_device.yaml, sync.yaml):
 * device keys and one-time keys uploaded (POST /keys/upload), queried (POST /keys/query) and
 * claimed (POST /keys/claim, a one-time key given out once, the fallback key when none is
 * left), to-device messages (PUT /sendToDevice/{type}/{txn}, a txn id twice sends once) queued
 * per device until a /sync delivers them, and what a /sync says about keys: `to_device`,
 * `device_lists.changed` (a user who shares a room, or the user themself, got a new device or
 * new keys), `device_one_time_keys_count` and `device_unused_fallback_key_types`.
 *
 * No HTTP here: the peer (matrix.ts) routes requests to it, and a unit test can drive it with
 * the crypto machines directly. As Synapse (element-hq/synapse synapse/handlers/e2e_keys.py,
 * upload_keys_for_user): device keys must be for the caller's own user and device and replace
 * what the device had (a change is announced in device lists); a one-time key id the device
 * already uploaded with other contents is refused, 400 "One time key … already exists" — what a
 * client that lost its crypto store and reuses its device id runs into.
 */

/** A refusal, as the homeserver answers it. */
export class KeyError extends Error {
  readonly status: number;
  readonly errcode: string;
  constructor(status: number, errcode: string, message: string) {
    super(message);
    this.status = status;
    this.errcode = errcode;
  }
}

export type Json = Record<string, unknown>;

interface Device {
  keys?: Json;
  readonly oneTime: Map<string, Json | string>;
  /** One-time keys given out by a claim (their ids stay taken). */
  readonly claimed: Map<string, Json | string>;
  fallback: { readonly id: string; readonly key: Json | string; used: boolean } | undefined;
  readonly inbox: Array<{ readonly id: number; readonly event: Json }>;
  /**
   * Users whose device lists changed and the position of the change (numbered with the
   * to-device messages): like them kept until a sync past them confirms them, so a /sync from
   * an older `since` (the client crashed before saving the position) says it again (sync.yaml).
   */
  readonly changed: Map<string, number>;
}

export class MatrixKeyServer {
  readonly #devices = new Map<string, Map<string, Device>>();
  readonly #txns = new Set<string>();
  /** Per device: the next_batch a sync delivered to-device messages with, and the last one it held. */
  readonly #delivered = new Map<string, { readonly token: string; readonly upTo: number }>();
  #seq = 0;
  /** Who may see whose devices change (users sharing a room); the peer sets it. */
  readonly sharing: (user: string) => Iterable<string>;
  /** Called when a device has something new for its /sync (the peer wakes its long polls). */
  readonly changed: () => void;

  constructor(sharing: (user: string) => Iterable<string> = () => [], changed: () => void = () => undefined) {
    this.sharing = sharing;
    this.changed = changed;
  }

  /** Whether a /sync of this device has key news (to-device messages, device-list changes). */
  pending(user: string, deviceId: string): boolean {
    const device = this.#devices.get(user)?.get(deviceId);
    return device !== undefined && (device.inbox.length > 0 || device.changed.size > 0);
  }

  /**
   * The key parts of the /sync a device asked for with `since`, answered with `nextBatch`: a
   * `since` that is the token to-device messages came with confirms them (they are dropped, as
   * a homeserver drops them once the client has moved past); any other delivers them again.
   */
  syncPart(user: string, deviceId: string, since: string | undefined, nextBatch: string): Json {
    const id = `${user}\u0000${deviceId}`;
    const delivered = this.#delivered.get(id);
    if (delivered && since === delivered.token) this.confirm(user, deviceId, delivered.upTo);
    const { part, upTo } = this.sync(user, deviceId);
    if (upTo > 0) this.#delivered.set(id, { token: nextBatch, upTo });
    return part;
  }

  #device(user: string, device: string): Device {
    let devices = this.#devices.get(user);
    if (!devices) this.#devices.set(user, (devices = new Map()));
    let found = devices.get(device);
    if (!found) devices.set(device, (found = { oneTime: new Map(), claimed: new Map(), fallback: undefined, inbox: [], changed: new Map() }));
    return found;
  }

  /** A device's keys changed: tell every device of the users who can see it (itself included). */
  #announce(user: string): void {
    for (const other of new Set([user, ...this.sharing(user)])) for (const device of this.#devices.get(other)?.values() ?? []) device.changed.set(user, ++this.#seq);
  }

  /** Two users now share a room: each one's devices learn of the other's. */
  announceShared(a: string, b: string): void {
    for (const device of this.#devices.get(a)?.values() ?? []) device.changed.set(b, ++this.#seq);
    for (const device of this.#devices.get(b)?.values() ?? []) device.changed.set(a, ++this.#seq);
  }

  /** POST /keys/upload. Throws a {@link KeyError} for a request a homeserver refuses. */
  upload(user: string, deviceId: string, body: Json): Json {
    const device = this.#device(user, deviceId);
    const keys = body.device_keys as Json | undefined;
    if (keys) {
      if (keys.user_id !== user || keys.device_id !== deviceId) throw new KeyError(400, 'M_INVALID_PARAM', 'device_keys are not for this user and device');
      const changed = JSON.stringify(device.keys) !== JSON.stringify(keys);
      device.keys = keys;
      if (changed) {
        this.#announce(user);
        this.changed();
      }
    }
    const oneTime = Object.entries((body.one_time_keys as Json | undefined) ?? {});
    for (const [id, key] of oneTime) {
      const known = device.oneTime.get(id) ?? device.claimed.get(id);
      if (known !== undefined && JSON.stringify(known) !== JSON.stringify(key)) throw new KeyError(400, 'M_UNKNOWN', `One time key ${id} already exists. Old key: ${JSON.stringify(known)}; new key: ${JSON.stringify(key)}`);
    }
    for (const [id, key] of oneTime) if (!device.oneTime.has(id) && !device.claimed.has(id)) device.oneTime.set(id, key as Json);
    const fallback = Object.entries((body.fallback_keys as Json | undefined) ?? {})[0];
    if (fallback) device.fallback = { id: fallback[0], key: fallback[1] as Json, used: false };
    return { one_time_key_counts: this.counts(user, deviceId) };
  }

  /** One-time keys left, by algorithm. */
  counts(user: string, deviceId: string): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const id of this.#device(user, deviceId).oneTime.keys()) {
      const algorithm = id.split(':')[0] ?? id;
      counts[algorithm] = (counts[algorithm] ?? 0) + 1;
    }
    return counts;
  }

  /** POST /keys/query. */
  query(body: Json): Json {
    const deviceKeys: Record<string, Record<string, Json>> = {};
    for (const [user, wanted] of Object.entries((body.device_keys as Record<string, string[]> | undefined) ?? {})) {
      const devices: Record<string, Json> = {};
      for (const [id, device] of this.#devices.get(user) ?? []) if (device.keys && (wanted.length === 0 || wanted.includes(id))) devices[id] = device.keys;
      deviceKeys[user] = devices;
    }
    return { device_keys: deviceKeys, failures: {}, master_keys: {}, self_signing_keys: {}, user_signing_keys: {} };
  }

  /** POST /keys/claim: one one-time key per device asked for (taken), else its fallback key. */
  claim(body: Json): Json {
    const claimed: Record<string, Record<string, Json>> = {};
    for (const [user, devices] of Object.entries((body.one_time_keys as Record<string, Record<string, string>> | undefined) ?? {})) {
      for (const [deviceId, algorithm] of Object.entries(devices)) {
        const device = this.#devices.get(user)?.get(deviceId);
        if (!device) continue;
        const id = [...device.oneTime.keys()].find((key) => key.startsWith(`${algorithm}:`));
        let key: Json | undefined;
        if (id !== undefined) {
          const taken = device.oneTime.get(id)!;
          key = { [id]: taken };
          device.claimed.set(id, taken);
          device.oneTime.delete(id);
        } else if (device.fallback && device.fallback.id.startsWith(`${algorithm}:`)) {
          key = { [device.fallback.id]: device.fallback.key };
          device.fallback.used = true;
        }
        if (key) (claimed[user] ??= {})[deviceId] = key;
      }
    }
    return { one_time_keys: claimed, failures: {} };
  }

  /** PUT /sendToDevice/{type}/{txnId}: `*` is every device of the user. */
  sendToDevice(sender: string, senderDevice: string, type: string, txnId: string, body: Json): Json {
    const txn = JSON.stringify([sender, senderDevice, txnId]);
    if (this.#txns.has(txn)) return {};
    this.#txns.add(txn);
    for (const [user, messages] of Object.entries((body.messages as Record<string, Record<string, Json>> | undefined) ?? {})) {
      for (const [deviceId, content] of Object.entries(messages)) {
        const targets = deviceId === '*' ? [...(this.#devices.get(user)?.values() ?? [])] : [this.#device(user, deviceId)];
        for (const device of targets) device.inbox.push({ id: ++this.#seq, event: { sender, type, content } });
      }
    }
    this.changed();
    return {};
  }

  /**
   * The key parts of a /sync for one device. Delivered to-device messages stay until the next
   * sync confirms them (its `since` is past them), as on a homeserver: `confirm` drops them.
   */
  sync(user: string, deviceId: string): { part: Json; upTo: number } {
    const device = this.#device(user, deviceId);
    const events = device.inbox.map((entry) => entry.event);
    const changed = [...device.changed.keys()];
    const fallbackTypes = device.fallback && !device.fallback.used ? [device.fallback.id.split(':')[0]] : [];
    return {
      part: {
        to_device: { events },
        device_lists: { changed, left: [] },
        device_one_time_keys_count: this.counts(user, deviceId),
        device_unused_fallback_key_types: fallbackTypes,
      },
      upTo: Math.max(device.inbox.at(-1)?.id ?? 0, ...device.changed.values()),
    };
  }

  /** The device's to-device messages and device-list changes up to `upTo` were delivered and confirmed: drop them. */
  confirm(user: string, deviceId: string, upTo: number): void {
    const { inbox, changed } = this.#device(user, deviceId);
    while (inbox.length > 0 && (inbox[0]?.id ?? Infinity) <= upTo) inbox.shift();
    for (const [other, at] of changed) if (at <= upTo) changed.delete(other);
  }

  /** The ids of a user's devices with keys. */
  devices(user: string): string[] {
    return [...(this.#devices.get(user) ?? [])].filter(([, device]) => device.keys !== undefined).map(([id]) => id);
  }
}

/**
 * The key endpoints of the client-server API for `user`'s `device` (keys.yaml, to_device.yaml):
 * the answer, or undefined when `path` (after /_matrix/client/v3) is none of them.
 */
export function keyRoute(server: MatrixKeyServer, method: string, path: string, body: Json, user: string, device: string): Json | undefined {
  if (method === 'POST' && path === '/keys/upload') return server.upload(user, device, body);
  if (method === 'POST' && path === '/keys/query') return server.query(body);
  if (method === 'POST' && path === '/keys/claim') return server.claim(body);
  const toDevice = /^\/sendToDevice\/([^/]+)\/([^/]+)$/.exec(path);
  if (method === 'PUT' && toDevice) return server.sendToDevice(user, device, decodeURIComponent(toDevice[1] ?? ''), decodeURIComponent(toDevice[2] ?? ''), body);
  // Cross-signing and signatures: accepted and kept nowhere (the bot makes none; a client may).
  if (method === 'POST' && (path === '/keys/signatures/upload' || path === '/keys/device_signing/upload')) return { failures: {} };
  return undefined;
}
