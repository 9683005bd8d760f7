/**
 * The email channel: mail in over IMAP (imapflow, IDLE with a polling fallback), replies
 * out over SMTP (nodemailer), MIME parsed by mailparser.
 *
 * A conversation is a mail thread: `chat` is the thread's root Message-ID, `id` the mail's
 * Message-ID, `account` the bot's address, `sender.id` the From address (lower-cased).
 * Replies go to the From address of the mail answered, as a proper reply ("Re: …",
 * In-Reply-To, References) from the bot's address, and are saved in the Sent folder. What a
 * reply needs about the mail it answers, and the thread of every mail the bot sent, are kept
 * in the channel state (threads.ts), where a node taking the channel over finds them; if they were lost, the mail
 * is looked up by Message-ID over IMAP (the INBOX for mail answered, the Sent folder for the
 * bot's own).
 * Mail that must never be answered (bounces, lists, autoresponders, the bot's own) is
 * marked \Seen and logged, never pushed.
 */
import { randomUUID } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import nodemailer from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type Mail from 'nodemailer/lib/mailer/index.js';
import {
  SendError,
  type Channel,
  type ChannelContext,
  type FileSender,
  type ListenLink,
  type LivenessWatched,
  type MessageLimit,
  type OutboundFile,
  type OutboundMessage,
  type Push,
} from '../../src/channel.ts';
import type { EmailConfig } from './config.ts';
import type { ConversationRef } from '../../src/conversation.ts';
import { describeSmtpError, toSendError } from './errors.ts';
import { closeClient, findReplyTarget, findSentFolder, findSentMail, imapClient, savesSentMailItself } from './imap.ts';
import { replySubject } from './inbound.ts';
import { HEARTBEAT_MS, receive } from './intake.ts';
import { renderHtml, renderPlain } from './render.ts';
import { ThreadBook, type ReplyTarget, type SentMail } from './threads.ts';
import { BoundedMap } from '../../src/bounded-map.ts';

/** A reply is one mail: the limit only guards against absurd lengths. */
export const EMAIL_LIMIT = 100_000;
/** References kept in a reply: the thread's root and the most recent ones (RFC 5322 §3.6.4). */
const MAX_REFERENCES = 20;

export type EmailChannel = Channel & MessageLimit & FileSender & LivenessWatched;

export function createEmailChannel(config: EmailConfig, ctx: ChannelContext): EmailChannel {
  const log = ctx.log;
  const address = config.address.toLowerCase();
  const domain = address.split('@')[1]!;
  const threads = new ThreadBook({ state: ctx.state, legacyDir: ctx.stateDir, log, ...(ctx.storage ? { storage: ctx.storage } : {}) });
  const { smtp } = config;
  const transport = nodemailer.createTransport({
    host: smtp.host,
    port: smtp.port ?? (smtp.tls ? 465 : 587),
    secure: smtp.tls,
    auth: { user: smtp.user, pass: smtp.password },
    connectionTimeout: 30_000,
    greetingTimeout: 30_000,
    socketTimeout: 60_000,
  });
  /** Per thread, the mail the reply being sent answers: a reply's later parts (sent without replyTo) answer it too. */
  const answering = new BoundedMap<string, ReplyTarget>(1000);
  /** undefined: not looked up yet; null: the server has no Sent folder. */
  let sentFolder: string | null | undefined;
  /** Whether the server files mail sent through its SMTP in Sent by itself (undefined: not known yet). */
  let savesSentItself: boolean | undefined;
  /** The copies of sent mail still being filed in Sent, chained so they are filed in send order (see `deliver`). */
  let filing: Promise<void> = Promise.resolve();

  async function withImap<T>(work: (client: ReturnType<typeof imapClient>) => Promise<T>): Promise<T> {
    const client = imapClient(config);
    try {
      await client.connect();
      return await work(client);
    } finally {
      await closeClient(client);
    }
  }

  /** The mail a reply answers: the one replied to, else the latest of the thread; from the thread book, else from the mailbox. */
  async function replyTarget(ref: ConversationRef, replyTo: string | undefined): Promise<ReplyTarget> {
    await threads.ready(); // a send may come before the first listen (replies left pending by a restart)
    const known = (replyTo === undefined ? answering.get(ref.chat) : threads.byId(replyTo)) ?? threads.byChat(ref.chat);
    if (known) return known;
    // Not in the record (state lost): the mail answered, else the thread's first, as the mailbox has them.
    const wanted = [...new Set([replyTo ?? ref.chat, ref.chat])];
    log.info({ messageIds: wanted }, 'thread not in the local record; looking the mail up over IMAP');
    let found: ReplyTarget | undefined;
    try {
      found = await withImap(async (client) => {
        for (const id of wanted) {
          const target = await findReplyTarget(client, config.folder, id);
          if (target) return target;
        }
        return undefined;
      });
    } catch (error) {
      throw new SendError(`looking up ${wanted.join(', ')} over IMAP failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    if (!found) throw new SendError(`no mail to answer in thread ${ref.chat}: neither in the local record nor in ${config.folder}`, { permanent: true });
    // The conversation is the outbound message's: its headers alone may name another root (a terse client's reply).
    const target = { ...found, chat: ref.chat };
    await threads.record(target);
    return target;
  }

  /** The Sent folder's path (looked up once per channel), or null when the server has none. */
  async function sentFolderOf(client: ReturnType<typeof imapClient>): Promise<string | null> {
    if (sentFolder === undefined) {
      sentFolder = (await findSentFolder(client)) ?? null;
      log.info({ folder: sentFolder }, sentFolder ? 'Sent folder found' : 'the server has no Sent folder');
    }
    return sentFolder;
  }

  /** For receive: the thread of a bot mail named by a reply that the thread book does not know, from the Sent folder. */
  async function findSentThread(ids: readonly string[], sender: string): Promise<string | undefined> {
    if (sentFolder === null) return undefined;
    try {
      const found = await withImap(async (client) => {
        const folder = await sentFolderOf(client);
        return folder === null ? [] : findSentMail(client, folder, ids, address);
      });
      for (const mail of found) await threads.recordSent(mail);
      const chat = found.find((mail) => mail.to === sender)?.chat;
      if (found.length > 0) log.info({ messageIds: ids, found: found.map((mail) => mail.id), chat }, 'reply to a mail the bot sent, found in the Sent folder');
      return chat;
    } catch (error) {
      // Not fatal: the mail is still answered, in the thread its headers name.
      log.warn({ messageIds: ids, reason: error instanceof Error ? error.message : String(error) }, 'looking the mails a reply names up in the Sent folder failed');
      return undefined;
    }
  }

  /**
   * Mail options for a reply to `target` (headers, subject, addresses). References start with
   * the thread's root even when the mail answered left it out (a terse client's reply naming
   * only the bot's mail): clients thread by it, and a reply to this mail that keeps it lands
   * in the thread by its headers alone.
   */
  function replyHeaders(target: ReplyTarget): Mail.Options & { readonly messageId: string } {
    const references = [...new Set([target.chat, ...target.references, target.id])];
    const kept = references.length > MAX_REFERENCES ? [references[0]!, ...references.slice(-(MAX_REFERENCES - 1))] : references;
    return {
      from: { name: ctx.assistantName, address: config.address },
      to: target.name ? { name: target.name, address: target.address } : target.address,
      subject: replySubject(target.subject),
      inReplyTo: target.id,
      references: kept,
      messageId: `<${randomUUID()}@${domain}>`,
      date: new Date(),
      // RFC 3834: other responders must not answer us (no loops); Exchange: no out-of-office replies to the bot
      headers: { 'Auto-Submitted': 'auto-replied', 'X-Auto-Response-Suppress': 'All' },
      disableFileAccess: true,
      disableUrlAccess: true,
    };
  }

  /**
   * Sends a composed mail to `to`, then files a copy in Sent (after `send` resolved). Its Message-ID is recorded with its
   * thread before it is handed to SMTP, so that a crash can never leave a sent mail unrecorded
   * (a crash or a failure before the send leaves a record of a mail never sent: harmless, no
   * reply names it; a retry is a new mail with a new Message-ID). Were the record lost anyway
   * (the database restored from an older backup), a reply naming the mail
   * finds it in the Sent folder (`findSentThread`).
   */
  async function deliver(options: Mail.Options, sent: SentMail, what: string): Promise<void> {
    await threads.recordSent(sent);
    const raw = await new MailComposer(options).compile().build();
    try {
      await transport.sendMail({ envelope: { from: config.address, to: [sent.to] }, raw });
    } catch (error) {
      const failure = toSendError(error, what);
      log.warn({ reason: describeSmtpError(error), permanent: failure.permanent }, `${what} failed`);
      throw failure;
    }
    // The mail is out, and `send` resolves now so the outbox marks it sent at once. Filing the
    // copy in Sent takes an IMAP session of its own (connect, login, APPEND, logout: hundreds of
    // ms); awaited here, it held the outbox's mark back that long, and a crash in that time made
    // the restarted daemon mail the person the same reply again. So it comes after, one copy at a
    // time in send order. A crash meanwhile loses the copy in Sent, never the mail; on a graceful
    // stop the open IMAP session keeps the process alive until the copy is filed.
    filing = filing.then(() =>
      fileInSent(raw).catch((error: unknown) =>
        log.warn({ reason: error instanceof Error ? error.message : String(error) }, 'the reply was sent but could not be saved in the Sent folder'),
      ),
    );
  }

  async function fileInSent(raw: Buffer): Promise<void> {
    if (sentFolder === null || savesSentItself === true) return;
    await withImap(async (client) => {
      if (savesSentItself === undefined) {
        savesSentItself = savesSentMailItself(client);
        if (savesSentItself) log.info('the server saves sent mail in Sent itself');
      }
      const folder = savesSentItself ? null : await sentFolderOf(client);
      if (folder) await client.append(folder, raw, ['\\Seen']);
    });
  }

  const heartbeatMs = Math.min(config.poll_seconds * 1000, HEARTBEAT_MS);

  return {
    name: ctx.name,
    maxMessageLength: EMAIL_LIMIT,
    // a poll or NOOP at least every heartbeat; allow for one slow round and a reconnect
    livenessTimeoutMs: heartbeatMs * 2 + 30_000,

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      await threads.reload(); // not at construction: the last owner may have added to it since
      return receive({ config, ctx, threads, log, findSentThread }, push, signal, link);
    },

    async send(message: OutboundMessage): Promise<void> {
      const target = await replyTarget(message, message.replyTo);
      answering.setNewest(message.chat, target); // the thread answered longest ago is dropped first
      const headers = replyHeaders(target);
      await deliver(
        { ...headers, text: renderPlain(message.text), ...(config.html ? { html: renderHtml(message.text) } : {}) },
        { id: headers.messageId, chat: message.chat, to: target.address },
        'sending the reply',
      );
    },

    async sendFile(ref: ConversationRef, file: OutboundFile): Promise<void> {
      const size = (await stat(file.path)).size;
      if (size > config.max_message_mb * 1024 * 1024) {
        throw new SendError(`${file.name} is ${(size / 1024 / 1024).toFixed(1)} MB, over the ${config.max_message_mb} MB mail limit`, { permanent: true });
      }
      const target = await replyTarget(ref, undefined);
      const headers = replyHeaders(target);
      await deliver(
        { ...headers, text: `Attached: ${file.name}`, attachments: [{ filename: file.name, content: await readFile(file.path) }] },
        { id: headers.messageId, chat: ref.chat, to: target.address },
        'sending a file',
      );
    },
  };
}
