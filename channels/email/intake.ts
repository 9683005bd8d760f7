/**
 * The receiving side: one IMAP session per `listen`. It opens the folder, reports ready,
 * reads every UNSEEN mail, then waits in IDLE for new mail (or polls every `poll_seconds`
 * where the server has no IDLE), with a NOOP at least every minute as proof of life.
 *
 * Exactly once: a mail is marked \Seen only after `push` resolved, i.e. once it is durably
 * in the runtime's inbox — from there the runtime answers it exactly once, even across a
 * crash. A crash before \Seen makes the mail UNSEEN on the next start: it is pushed again and
 * the inbox recognises its Message-ID. (The issue asks for \Seen only once the reply is in
 * the outbox; that would need the channel to wait for the turn, and buys nothing the inbox's
 * durability does not already give.) Mails that must never be answered are marked \Seen
 * with a log line saying why.
 *
 * A dropped connection ends `listen` with an error; the supervisor restarts it with backoff.
 */
import type { ImapFlow } from 'imapflow';
import { simpleParser, type ParsedMail } from 'mailparser';
import type { Logger } from 'pino';
import type { ChannelContext, InboundMessage, ListenLink, Push } from '../../src/channel.ts';
import type { EmailConfig } from './config.ts';
import { closeClient, imapClient, Waker } from './imap.ts';
import { knownThread, namedIds, normalise, parentReferences, screen } from './inbound.ts';
import type { ThreadBook } from './threads.ts';
import { withAttachments } from '../../src/inbound/with-attachments.ts';

/** Longest wait without talking to the server (a NOOP or a poll), so a dead connection shows. */
export const HEARTBEAT_MS = 60_000;

export interface ReceiveOptions {
  readonly config: EmailConfig;
  readonly ctx: ChannelContext;
  readonly threads: ThreadBook;
  readonly log: Logger;
  /**
   * The thread of a mail the bot sent to `sender`, the first of `ids` (newest first) found in
   * its Sent folder; for replies that name no mail the thread book knows. Never throws (a
   * failed lookup is logged and gives undefined).
   */
  readonly findSentThread: (ids: readonly string[], sender: string) => Promise<string | undefined>;
}

export async function receive(options: ReceiveOptions, push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
  const { config, log } = options;
  const client = imapClient(config);
  const waker = new Waker();
  client.on('exists', waker.wake);
  client.on('close', waker.wake);
  const onAbort = (): void => client.close();
  signal.addEventListener('abort', onAbort, { once: true });
  const pollMs = config.poll_seconds * 1000;
  const heartbeatMs = Math.min(pollMs, HEARTBEAT_MS);
  try {
    await client.connect();
    const mailbox = await client.mailboxOpen(config.folder);
    link.ready();
    const idle = client.capabilities.has('IDLE');
    log.info({ folder: mailbox.path, messages: mailbox.exists, idle }, 'IMAP mailbox open');
    let lastPoll = 0;
    let woken = true; // a poll right after every (re)connect
    while (!signal.aborted) {
      if (woken || performance.now() - lastPoll >= pollMs) {
        waker.reset();
        await readUnseen(options, client, push, signal, link);
        lastPoll = performance.now(); // monotonic: a clock step must not stop or bunch up polls
      } else {
        await client.noop();
      }
      link.alive();
      if (signal.aborted) break;
      if (!client.usable) throw new Error('the IMAP connection closed');
      // The next command (a poll, a NOOP) ends the IDLE; imapflow sends DONE first.
      if (idle) void client.idle().catch(() => undefined);
      woken = (await waker.wait(heartbeatMs, signal)) === 'woken';
      if (!client.usable && !signal.aborted) throw new Error('the IMAP connection closed');
    }
  } catch (error) {
    if (signal.aborted) return;
    throw error;
  } finally {
    signal.removeEventListener('abort', onAbort);
    await closeClient(client);
  }
}

/** Handles every UNSEEN mail in the folder, oldest first. */
async function readUnseen(options: ReceiveOptions, client: ImapFlow, push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
  const found = await client.search({ seen: false, deleted: false }, { uid: true });
  const uids = [...(found || [])].sort((a, b) => a - b);
  for (const uid of uids) {
    if (signal.aborted) return;
    await readMail(options, client, uid, push);
    link.alive();
  }
}

/** Reads one mail: screens it by its headers and size, parses it, pushes it, marks it \Seen. Throws only for IMAP and push failures. */
async function readMail(options: ReceiveOptions, client: ImapFlow, uid: number, push: Push): Promise<void> {
  const { config, ctx, threads } = options;
  const self = config.address.toLowerCase();
  const markSeen = async (): Promise<void> => {
    await client.messageFlagsAdd(String(uid), ['\\Seen'], { uid: true });
  };
  const head = await client.fetchOne(String(uid), { uid: true, size: true, headers: true, internalDate: true }, { uid: true });
  if (!head || !head.headers) return; // expunged meanwhile
  let headers: ParsedMail;
  try {
    headers = await simpleParser(head.headers);
  } catch (error) {
    options.log.warn({ uid, err: error }, 'mail not answered: its headers could not be read');
    return markSeen();
  }
  const { id, from, guard } = screen(headers, head.headers, self);
  const log = options.log.child({ uid, messageId: id, from });
  if (guard) {
    log.info({ reason: guard }, `mail not answered: ${guard}`);
    return markSeen();
  }
  const maxBytes = config.max_message_mb * 1024 * 1024;
  if (head.size !== undefined && head.size > maxBytes) {
    log.warn({ size: head.size, limitMb: config.max_message_mb }, 'mail not answered: too large to read');
    return markSeen();
  }

  const full = await client.fetchOne(String(uid), { uid: true, source: true }, { uid: true });
  if (!full || !full.source) return;
  let mail: ParsedMail;
  try {
    mail = await simpleParser(full.source);
  } catch (error) {
    log.warn({ err: error }, 'mail not answered: it could not be read');
    return markSeen();
  }
  const chat = await threadOf(options, mail, from ?? '');
  let message: InboundMessage;
  try {
    const internalDate = head.internalDate instanceof Date ? head.internalDate.getTime() : Date.now();
    message = normalise(mail, { channel: ctx.name, account: self, messageId: id, receivedAt: internalDate, ...(chat === undefined ? {} : { chat }) });
  } catch (error) {
    log.warn({ err: error }, 'mail not answered: it could not be read');
    return markSeen();
  }
  const withFiles = await saveAttachments(ctx, mail, message);
  await threads.record({
    id: message.id,
    chat: message.chat,
    address: message.sender.id,
    ...(message.sender.name ? { name: message.sender.name } : {}),
    subject: mail.subject ?? '',
    references: parentReferences(mail),
  });
  const result = await push(withFiles);
  if (result === 'duplicate') log.info('mail handed out again (not yet marked read): already in the inbox');
  else log.debug({ chat: message.chat }, 'mail received');
  await markSeen();
}

/**
 * The thread of a reply the thread book knows (a known root, or a mail the bot sent), else
 * the one the bot's Sent folder knows (the book lost it, or dropped it as too old); undefined
 * for a new mail or a thread the bot never took part in (the root its headers name decides).
 */
async function threadOf(options: ReceiveOptions, mail: ParsedMail, sender: string): Promise<string | undefined> {
  const headers = { ...(mail.references === undefined ? {} : { references: mail.references }), ...(mail.inReplyTo === undefined ? {} : { inReplyTo: mail.inReplyTo }) };
  const known = knownThread(headers, sender, options.threads);
  if (known !== undefined) return known;
  const named = namedIds(headers);
  return named.length === 0 ? undefined : options.findSentThread(named, sender);
}

/**
 * Saves the mail's files in the workspace: its attachments, and the images its HTML shows inline
 * (multipart/related parts referenced as `cid:`, RFC 2392; mailparser marks them `related`), which
 * are photos the model sees like any other. Other related parts (fonts, style sheets) are the
 * HTML's furniture, not files the person sent. An inline image without a name gets one from its
 * position, so two of them never share a path.
 */
function saveAttachments(ctx: ChannelContext, mail: ParsedMail, message: InboundMessage): Promise<InboundMessage> {
  const image = (file: ParsedMail['attachments'][number]): boolean => file.contentType.toLowerCase().startsWith('image/');
  const files = mail.attachments.filter((file) => image(file) || !(file.related && file.contentDisposition !== 'attachment'));
  return withAttachments(ctx.attachments, message, files, (file, i) => {
    const name = file.filename ?? (image(file) ? `inline-${i + 1}.${inlineExtension(file.contentType)}` : undefined);
    return {
      kind: image(file) ? 'photo' : 'file',
      ...(name ? { name } : {}),
      mime: file.contentType,
      size: file.size,
      download: async () => new Uint8Array(file.content),
    };
  });
}

function inlineExtension(mime: string): string {
  const subtype = mime.toLowerCase().split('/')[1]?.split(/[;+]/)[0]?.replace(/[^a-z0-9]/g, '') ?? '';
  return subtype === 'jpeg' ? 'jpg' : subtype || 'bin';
}
