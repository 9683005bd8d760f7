/**
 * The email ChatPeer: a real mail system (dovecot + postfix, see mailserver.ts) with the bot's
 * mailbox and one per person. People send with nodemailer through postfix and read their own
 * INBOX with imapflow (IDLE), as a mail client would.
 *
 * The `dm` place is one thread between a person and the bot: the first post starts it (its
 * subject is the post's first line), later posts answer the latest mail of the thread with
 * In-Reply-To / References and quote it under an "On … wrote:" line, as mail clients do.
 * `reset()` starts new threads. botMessages(dm) are the bot's mails in that person's INBOX
 * that belong to the current thread; text = the plain body.
 *
 * Email has no groups, no edits, no typing indicator; strangers are never answered.
 */
import { randomUUID } from 'node:crypto';
import { ImapFlow } from 'imapflow';
import { simpleParser, type HeaderLines } from 'mailparser';
import nodemailer from 'nodemailer';
import type Mail from 'nodemailer/lib/mailer/index.js';
import type { BotMessage, ChatPeer, PeerUser, Place } from '../contracts/chat-channel.ts';
import { startMailServer, type MailAccount, type MailServer } from './mailserver.ts';

/** A mail as a person's (or the bot's) mail client shows it. */
export interface ReceivedMail {
  readonly uid: number;
  readonly messageId: string;
  /** From address, lower-cased. */
  readonly from: string;
  readonly fromName: string | undefined;
  readonly to: string[];
  readonly subject: string;
  readonly inReplyTo: string | undefined;
  readonly references: string[];
  /** The plain body without its final line break. */
  readonly text: string;
  readonly html: string | undefined;
  readonly attachments: Array<{ name: string; mime: string; size: number }>;
  readonly headers: HeaderLines;
  readonly flags: ReadonlySet<string>;
}

/** What a person puts in a mail (everything optional but the text). */
export interface OutgoingMail {
  readonly text: string;
  readonly subject?: string;
  readonly html?: string;
  readonly messageId?: string;
  readonly inReplyTo?: string;
  readonly references?: readonly string[];
  readonly headers?: Record<string, string>;
  readonly attachments?: Mail.Attachment[];
  /** Header From, when it differs from the person (spoofed, a robot). */
  readonly from?: string;
  /** SMTP envelope (default: from the person to the bot). */
  readonly envelope?: { from: string; to: string[] };
}

export interface EmailPeer extends ChatPeer {
  readonly server: MailServer;
  readonly bot: MailAccount;
  readonly accounts: Readonly<Record<PeerUser, MailAccount>>;
  /** Config section with extra lines for `[channels.email]` (before the policy keys). */
  configSection(extra?: string): string;
  /** A person sends a mail to the bot (or as `envelope` says); returns its Message-ID. */
  mail(user: PeerUser, mail: OutgoingMail): Promise<string>;
  /** Every mail in a person's INBOX so far (since the peer started), in arrival order. */
  inbox(user: PeerUser): readonly ReceivedMail[];
  /** The Message-ID that started a person's current dm thread, once they posted. */
  threadRoot(user: PeerUser): string | undefined;
  /** Reads a folder of any account now (e.g. the bot's Sent folder, its INBOX flags). */
  readFolder(account: MailAccount, folder: string): Promise<ReceivedMail[]>;
  /** Clears \Seen on a mail (as if the bot had crashed before marking it). */
  markUnseen(account: MailAccount, folder: string, messageId: string): Promise<void>;
}

const names: Record<PeerUser, string> = { alice: 'Alice Liddell', bob: 'Bob Builder', mallory: 'Mallory Mole' };
const people: readonly PeerUser[] = ['alice', 'bob', 'mallory'];

interface Thread {
  root: string | undefined;
  subject: string;
  /** Message-IDs of the thread in order (the person's posts and the bot's replies). */
  chain: string[];
  /** The latest mail of the thread, quoted in the next post. */
  last: { author: string; text: string } | undefined;
}

export async function startEmailPeer(): Promise<EmailPeer> {
  const server = await startMailServer(['bot', ...people]);
  const bot = server.accounts.bot!;
  const accounts = Object.fromEntries(people.map((user) => [user, server.accounts[user]!])) as Record<PeerUser, MailAccount>;
  const transport = nodemailer.createTransport({ host: server.host, port: server.smtpPort, secure: false, ignoreTLS: true });
  const watchers = Object.fromEntries(people.map((user) => [user, new MailboxWatcher(server, accounts[user])])) as Record<PeerUser, MailboxWatcher>;
  const newThread = (): Thread => ({ root: undefined, subject: '', chain: [], last: undefined });
  let threads = Object.fromEntries(people.map((user) => [user, newThread()])) as Record<PeerUser, Thread>;

  const dmUser = (place: Place): PeerUser => {
    if (place.kind !== 'dm') throw new Error(`email has no ${place.kind}: every thread is one person and the bot`);
    return place.user;
  };
  /** The bot's mails in the person's current thread, also noting them in the thread's chain. */
  const botMails = (user: PeerUser): ReceivedMail[] => {
    const thread = threads[user];
    if (thread.root === undefined) return [];
    const mails = watchers[user].mails.filter((m) => m.from === bot.address && (m.references.includes(thread.root!) || m.inReplyTo === thread.root));
    for (const m of mails) {
      if (!thread.chain.includes(m.messageId)) {
        thread.chain.push(m.messageId);
        thread.last = { author: `${m.fromName ?? 'Bot'} <${m.from}>`, text: m.text };
      }
    }
    return mails;
  };

  async function send(user: PeerUser, mail: OutgoingMail): Promise<string> {
    const account = accounts[user];
    const messageId = mail.messageId ?? `<${randomUUID()}@${server.domain}>`;
    await transport.sendMail({
      from: mail.from ?? { name: names[user], address: account.address },
      to: bot.address,
      subject: mail.subject ?? '',
      text: mail.text,
      ...(mail.html === undefined ? {} : { html: mail.html }),
      messageId,
      ...(mail.inReplyTo === undefined ? {} : { inReplyTo: mail.inReplyTo }),
      ...(mail.references === undefined ? {} : { references: [...mail.references] }),
      ...(mail.headers === undefined ? {} : { headers: mail.headers }),
      ...(mail.attachments === undefined ? {} : { attachments: mail.attachments }),
      envelope: mail.envelope ?? { from: account.address, to: [bot.address] },
    });
    return messageId;
  }

  /** A post in the person's dm thread: a new thread's first mail, or a reply quoting the latest mail. */
  async function post(user: PeerUser, text: string, attachments?: Mail.Attachment[], subjectHint?: string): Promise<void> {
    botMails(user); // brings the bot's replies into the chain
    const thread = threads[user];
    const account = accounts[user];
    if (thread.root === undefined) {
      const subject = (text.split('\n')[0]!.trim() || subjectHint || 'hello').slice(0, 60).trim();
      const id = await send(user, { subject, text, ...(attachments ? { attachments } : {}) });
      thread.root = id;
      thread.subject = subject;
      thread.chain.push(id);
    } else {
      const quote = thread.last ? `\n\nOn ${new Date().toUTCString()}, ${thread.last.author} wrote:\n${thread.last.text.split('\n').map((line) => `> ${line}`).join('\n')}\n` : '';
      const id = await send(user, {
        subject: `Re: ${thread.subject}`,
        text: `${text}${quote}`,
        inReplyTo: thread.chain.at(-1)!,
        // as mail clients do in long threads: the root and the latest ones
        references: thread.chain.length > 10 ? [thread.chain[0]!, ...thread.chain.slice(-9)] : thread.chain,
        ...(attachments ? { attachments } : {}),
      });
      thread.chain.push(id);
    }
    thread.last = { author: `${names[user]} <${account.address}>`, text };
  }

  return {
    channel: 'email',
    limit: 100_000,
    users: { alice: accounts.alice.address, bob: accounts.bob.address, mallory: accounts.mallory.address },
    hasTyping: false,
    server,
    bot,
    accounts,
    configSection(extra = '') {
      const login = `host = "${server.host}", tls = false, user = "${bot.address}", password = "${bot.password}"`;
      return (
        `[channels.email]\naddress = "${bot.address}"\npoll_seconds = 5\n` +
        `imap = { port = ${server.imapPort}, ${login} }\nsmtp = { port = ${server.submissionPort}, ${login} }\n${extra}`
      );
    },
    async post(user, place, text) {
      dmUser(place);
      await post(user, text);
    },
    async postFile(user, place, file, caption) {
      dmUser(place);
      await post(user, caption ?? '', [{ filename: file.name, contentType: file.mime, content: Buffer.from(file.data) }], file.name);
    },
    mail: send,
    botMessages(place): BotMessage[] {
      return place.kind === 'dm' ? botMails(place.user).map((m) => ({ text: m.text, edits: 0 })) : [];
    },
    botFiles(place) {
      return place.kind === 'dm' ? botMails(place.user).flatMap((m) => m.attachments.map((a) => a.name)) : [];
    },
    typing: () => 0,
    inbox: (user) => watchers[user].mails,
    threadRoot: (user) => threads[user].root,
    reset() {
      threads = Object.fromEntries(people.map((user) => [user, newThread()])) as Record<PeerUser, Thread>;
    },
    readFolder: (account, folder) => readFolder(server, account, folder),
    async markUnseen(account, folder, messageId) {
      const client = connect(server, account);
      try {
        await client.connect();
        await client.mailboxOpen(folder);
        const uids = (await client.search({ header: { 'message-id': messageId } }, { uid: true })) || [];
        if (uids.length === 0) throw new Error(`no mail ${messageId} in ${account.address}'s ${folder}`);
        await client.messageFlagsRemove(uids, ['\\Seen'], { uid: true });
      } finally {
        client.close();
      }
    },
    async close() {
      await Promise.all(people.map((user) => watchers[user].close()));
      transport.close();
      await server.close();
    },
  };
}

async function toReceived(uid: number, source: Buffer, flags: ReadonlySet<string>): Promise<ReceivedMail> {
  const mail = await simpleParser(source);
  const first = mail.from?.value[0];
  const to = (Array.isArray(mail.to) ? mail.to : mail.to ? [mail.to] : []).flatMap((a) => a.value.map((v) => (v.address ?? '').toLowerCase()));
  const references = typeof mail.references === 'string' ? [mail.references] : (mail.references ?? []);
  return {
    uid,
    messageId: mail.messageId ?? '',
    from: (first?.address ?? '').toLowerCase(),
    fromName: first?.name || undefined,
    to,
    subject: mail.subject ?? '',
    inReplyTo: mail.inReplyTo,
    references: references.flatMap((r) => r.split(/\s+/)).filter(Boolean),
    text: (mail.text ?? '').replace(/\r\n/g, '\n').replace(/\n$/, ''),
    html: mail.html === false ? undefined : mail.html,
    attachments: mail.attachments.map((a) => ({ name: a.filename ?? '', mime: a.contentType, size: a.size })),
    headers: mail.headerLines,
    flags,
  };
}

function connect(server: MailServer, account: MailAccount): ImapFlow {
  const client = new ImapFlow({
    host: server.host,
    port: server.imapPort,
    secure: false,
    auth: { user: account.address, pass: account.password },
    logger: false,
    disableAutoIdle: true,
  });
  client.on('error', () => undefined);
  return client;
}

async function readFolder(server: MailServer, account: MailAccount, folder: string): Promise<ReceivedMail[]> {
  const client = connect(server, account);
  try {
    await client.connect();
    const box = await client.mailboxOpen(folder, { readOnly: true });
    if (box.exists === 0) return [];
    const raw: Array<{ uid: number; source: Buffer; flags: Set<string> }> = [];
    for await (const m of client.fetch('1:*', { uid: true, source: true, flags: true })) {
      if (m.source) raw.push({ uid: m.uid, source: m.source, flags: m.flags ?? new Set() });
    }
    return await Promise.all(raw.map((m) => toReceived(m.uid, m.source, m.flags)));
  } finally {
    client.close();
  }
}

/** Keeps a person's INBOX in view: IDLE, fetch what is new, reconnect when the server goes away. */
class MailboxWatcher {
  readonly mails: ReceivedMail[] = [];
  readonly #server: MailServer;
  readonly #account: MailAccount;
  #lastUid = 0;
  #closed = false;
  #client: ImapFlow | undefined;
  #wake: (() => void) | undefined;
  readonly #running: Promise<void>;

  constructor(server: MailServer, account: MailAccount) {
    this.#server = server;
    this.#account = account;
    this.#running = this.#run();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#client?.close();
    this.#wake?.();
    await this.#running;
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      const client = connect(this.#server, this.#account);
      this.#client = client;
      let woken: boolean;
      const wake = (): void => {
        woken = true;
        this.#wake?.();
      };
      client.on('exists', wake);
      client.on('close', wake);
      try {
        await client.connect();
        await client.mailboxOpen('INBOX');
        while (!this.#closed && client.usable) {
          woken = false;
          await this.#fetchNew(client);
          if (this.#closed || !client.usable) break;
          void client.idle().catch(() => undefined);
          if (!woken) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, 2000);
              this.#wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
          }
          this.#wake = undefined;
        }
      } catch {
        // the server went away: reconnect below
      }
      client.close();
      if (!this.#closed) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async #fetchNew(client: ImapFlow): Promise<void> {
    if (client.mailbox === false || client.mailbox.exists === 0) return;
    const raw: Array<{ uid: number; source: Buffer; flags: Set<string> }> = [];
    for await (const m of client.fetch(`${this.#lastUid + 1}:*`, { uid: true, source: true, flags: true }, { uid: true })) {
      if (m.uid > this.#lastUid && m.source) raw.push({ uid: m.uid, source: m.source, flags: m.flags ?? new Set() });
    }
    raw.sort((a, b) => a.uid - b.uid);
    for (const m of raw) {
      this.mails.push(await toReceived(m.uid, m.source, m.flags));
      this.#lastUid = m.uid;
    }
  }
}
