/** IMAP plumbing over imapflow: connections, the wait between polls, the Sent folder, finding a mail by Message-ID. */
import { ImapFlow } from 'imapflow';
import { simpleParser } from 'mailparser';
import type { EmailConfig } from './config.ts';
import { firstAddress, messageIds, parentReferences, threadRoot } from './inbound.ts';
import type { ReplyTarget, SentMail } from './threads.ts';

/** A client for the configured server (not yet connected). imapflow's own IDLE is off: the listen loop runs IDLE itself. */
export function imapClient(config: EmailConfig): ImapFlow {
  const { imap } = config;
  const client = new ImapFlow({
    host: imap.host,
    port: imap.port ?? (imap.tls ? 993 : 143),
    secure: imap.tls,
    auth: { user: imap.user, pass: imap.password },
    logger: false,
    disableAutoIdle: true,
    clientInfo: { name: 'Switchboard' },
    connectionTimeout: 30_000,
    greetingTimeout: 20_000,
    socketTimeout: 5 * 60_000,
  });
  // imapflow emits 'error' for a dropped connection; unhandled, it would end the process.
  // The command in flight fails too, and `usable` turns false: that is where it is handled.
  client.on('error', () => undefined);
  return client;
}

/** Ends a session: LOGOUT when the server answers quickly, then the socket is closed in any case. */
export async function closeClient(client: ImapFlow, graceMs = 500): Promise<void> {
  if (client.usable) {
    await Promise.race([client.logout().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
  }
  client.close();
}

/** Something that can wake a waiting loop: an EXISTS from the server, the connection closing. */
export class Waker {
  #pending = false;
  #wake: (() => void) | undefined;

  readonly wake = (): void => {
    this.#pending = true;
    this.#wake?.();
  };

  /** Forgets earlier wake-ups (called right before looking at the mailbox). */
  reset(): void {
    this.#pending = false;
  }

  /** Resolves on the next wake-up (at once if one came since `reset`), after `ms`, or when `signal` aborts. */
  async wait(ms: number, signal: AbortSignal): Promise<'woken' | 'timeout' | 'aborted'> {
    if (signal.aborted) return 'aborted';
    if (this.#pending) return 'woken';
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      return await new Promise((resolve) => {
        this.#wake = () => resolve('woken');
        timer = setTimeout(() => resolve('timeout'), ms);
        onAbort = () => resolve('aborted');
        signal.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      this.#wake = undefined;
      clearTimeout(timer);
      if (onAbort) signal.removeEventListener('abort', onAbort);
    }
  }
}

/** Path of the special-use \Sent folder, or undefined when the server has none. */
export async function findSentFolder(client: ImapFlow): Promise<string | undefined> {
  const folders = await client.list();
  return folders.find((folder) => folder.specialUse === '\\Sent')?.path;
}

/**
 * Gmail files mail sent through its SMTP in "Sent" by itself; appending a copy there would
 * show every reply twice.
 */
export function savesSentMailItself(client: ImapFlow): boolean {
  return client.capabilities.has('X-GM-EXT-1');
}

/** The reply target for a mail found by its Message-ID in `folder` (for a restart that lost the thread book). */
export async function findReplyTarget(client: ImapFlow, folder: string, messageId: string): Promise<ReplyTarget | undefined> {
  const lock = await client.getMailboxLock(folder, { readOnly: true });
  try {
    const uids = await client.search({ header: { 'message-id': messageId } }, { uid: true });
    const uid = uids ? uids.at(-1) : undefined;
    if (uid === undefined) return undefined;
    const fetched = await client.fetchOne(String(uid), { uid: true, headers: true }, { uid: true });
    if (!fetched || !fetched.headers) return undefined;
    const mail = await simpleParser(fetched.headers);
    const from = firstAddress(mail.from);
    if (!from) return undefined;
    const id = messageIds(mail.messageId)[0] ?? messageId;
    return {
      id,
      chat: threadRoot({ ...(mail.references === undefined ? {} : { references: mail.references }), ...(mail.inReplyTo === undefined ? {} : { inReplyTo: mail.inReplyTo }), messageId: id }),
      address: from.address,
      ...(from.name ? { name: from.name } : {}),
      subject: mail.subject ?? '',
      references: parentReferences(mail),
    };
  } finally {
    lock.release();
  }
}

/** Most Message-IDs of one mail looked up in the Sent folder (a long References is mostly older mail). */
const MAX_SENT_LOOKUP = 20;

/**
 * The mails from `self` in `folder` (the Sent folder) with one of `ids` (the first
 * MAX_SENT_LOOKUP of them), in the order of `ids`, each with the thread it belongs to (the
 * bot's replies start References with their thread's root) and whom it went to; for a reply
 * naming a bot mail that the thread book no longer knows.
 */
export async function findSentMail(client: ImapFlow, folder: string, ids: readonly string[], self: string): Promise<SentMail[]> {
  const wanted = ids.slice(0, MAX_SENT_LOOKUP);
  if (wanted.length === 0) return [];
  const lock = await client.getMailboxLock(folder, { readOnly: true });
  try {
    const criteria = wanted.map((id) => ({ header: { 'message-id': id } }));
    const uids = await client.search(criteria.length === 1 ? criteria[0]! : { or: criteria }, { uid: true });
    const found: SentMail[] = [];
    for (const uid of uids || []) {
      const fetched = await client.fetchOne(String(uid), { uid: true, headers: true }, { uid: true });
      if (!fetched || !fetched.headers) continue;
      const mail = await simpleParser(fetched.headers);
      const id = messageIds(mail.messageId)[0];
      const to = firstAddress(mail.to)?.address;
      if (id === undefined || to === undefined || !wanted.includes(id) || firstAddress(mail.from)?.address !== self.toLowerCase()) continue;
      const headers = { ...(mail.references === undefined ? {} : { references: mail.references }), ...(mail.inReplyTo === undefined ? {} : { inReplyTo: mail.inReplyTo }) };
      found.push({ id, chat: threadRoot({ ...headers, messageId: id }), to });
    }
    return found.sort((a, b) => wanted.indexOf(a.id) - wanted.indexOf(b.id));
  } finally {
    lock.release();
  }
}
