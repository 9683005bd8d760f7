/** The engines and channels the fault walk (test/contracts/fault-walk.ts) runs on. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Channel, ChannelContext } from '../../src/channel.ts';
import { parseConfig } from '../../app/config.ts';
import { channelModules } from '../../channels/registry.ts';
import type { AppConfig as Config } from '../../app/config.ts';
import { createPgBossQueue } from '../../src/cluster/pg-boss-queue.ts';
import { openDatabase } from '../../src/store/db.ts';
import { openPostgres } from '../../src/store/postgres/sql.ts';
import { sqliteDatabase } from '../../src/store/sqlite-sql.ts';
import type { WalkChannel, WalkEngine } from '../contracts/fault-walk.ts';
import type { ChatPeer, Place } from '../contracts/chat-channel.ts';
import { testLogger } from './log.ts';
import { startPostgres, type TestPostgres } from './postgres.ts';

export const sqliteEngine: WalkEngine = {
  name: 'sqlite',
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'sb-walk-db-'));
    const database = sqliteDatabase(openDatabase(join(dir, 'switchboard.db')));
    return {
      database,
      close: async () => {
        await database.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

/** PostgreSQL as a cluster runs it: the store and pg-boss's turn queue (one node). */
export const postgresEngine: WalkEngine = {
  name: 'postgres',
  async open() {
    const server: TestPostgres = await startPostgres();
    const url = await server.createDatabase();
    const log = testLogger();
    const database = await openPostgres({ url, log });
    return {
      database,
      queue: () => createPgBossQueue({ url, log, concurrency: 4, heartbeatSeconds: 10, turnTimeoutSeconds: 60, database }),
      close: async () => {
        await database.close();
        server.stop();
      },
    };
  },
};

/** A walked channel built as the daemon builds it: through its module in the registry. */
function build(config: Config, name: string, context: ChannelContext): Promise<Channel> {
  const module = channelModules.find((candidate) => candidate.name === name);
  const section = (config.channels as Record<string, unknown>)[name];
  if (!module || section === undefined) throw new Error(`no [channels.${name}] module or section for the walk`);
  return module.create(section as never, { config, mode: 'start', log: context.log, finish: () => undefined, interrupt: () => undefined, context });
}

/** A chat peer's channel, built from the peer's own config section as the daemon would, talked to in a DM by alice. */
export function peerChannel(peer: ChatPeer & { dropOnNextAck?(): void; undoSeen?(text: string): Promise<{ settled(): Promise<void> }> }, extra = ''): WalkChannel {
  const place: Place = { kind: 'dm', user: 'alice' };
  const text = `data_dir = "./data"\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "k"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n${extra}`;
  const config = parseConfig(text, undefined, {});
  return {
    name: peer.channel,
    build: (context) => build(config, peer.channel, context),
    say: (message) => peer.post('alice', place, message),
    replies: () => peer.botMessages(place).map((message) => message.text),
    // Slack: the ack is lost and the socket dropped (the envelope comes again on the next connection)
    ...(peer.dropOnNextAck ? { loseNextAck: () => peer.dropOnNextAck!() } : {}),
    // email: the \Seen flag lost (the channel finds the mail unread again)
    ...(peer.undoSeen ? { undoAck: (text: string) => peer.undoSeen!(text) } : {}),
    close: () => peer.close(),
  };
}

/**
 * The webhook channel behind a real gateway on loopback, driven as a sender would: a signed
 * POST, sent again with the same Idempotency-Key while it is answered 503 or the connection
 * fails (the response is the webhook's acknowledgement). Replies are the 200 answers and the
 * callback POSTs (each reply goes one way only).
 */
export async function webhookChannel(): Promise<WalkChannel> {
  const { createGateway } = await import('../../src/gateway/server.ts');
  const { createWebhookChannel } = await import('../../channels/webhook/index.ts');
  const { sign } = await import('../../channels/webhook/signature.ts');
  const { startCallbackReceiver } = await import('./callbacks.ts');
  const callbacks = await startCallbackReceiver();
  const secret = 'walk-secret';
  const answered: string[] = [];
  let gateway: ReturnType<typeof createGateway> | undefined;
  let base = '';
  let loseResponse = false;
  const health = () => ({ channels: [], queued: 0, inFlight: 0, pendingReplies: 0, counters: { received: 0, duplicates: 0, answered: 0, failed: 0, ignored: 0, sent: 0 } });
  return {
    name: 'webhook',
    async build(context) {
      await gateway?.stop(500);
      // a gateway per runtime, as the daemon has one: a restart registers the route afresh
      gateway = createGateway({ listen: '127.0.0.1:0', log: context.log, health });
      const channel = createWebhookChannel({ secret, reply_timeout_seconds: 2, allow: ['*'], legacy_signature: false, max_body_kb: 64, max_results: 10_000, result_retention_days: 7, max_results_mb: 16 }, { ...context, gateway });
      base = `http://127.0.0.1:${(await gateway.start()).port}`;
      return channel;
    },
    async say(text) {
      const key = `k-${text.replace(/[^A-Za-z0-9_-]/g, '_')}`;
      const body = JSON.stringify({ sender: 'crm', conversation: 'walk', text, callback_url: callbacks.url });
      if (loseResponse) {
        // sent and taken, and the answer lost on the way: the sender sends it again with its key
        loseResponse = false;
        await lostAnswer(`${base}/webhook`, { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) }, body);
      }
      await untilTaken(`the webhook never took ${text}`, 100, async (attempt) => {
        const response = await fetch(`${base}/webhook`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-switchboard-signature': sign(secret, { key, body }) },
          body,
        });
        const json = (await response.json()) as { reply?: string };
        if (response.status === 200 && typeof json.reply === 'string') {
          // an answer to a send again is the stored one: counted once
          if (attempt === 0 || !answered.includes(json.reply)) answered.push(json.reply);
          return true;
        }
        return response.status === 202;
      });
    },
    replies: () => [...answered, ...callbacks.bodies.map((body) => (JSON.parse(body) as { reply: string }).reply)],
    loseNextAck: () => void (loseResponse = true),
    async close() {
      await gateway?.stop(500);
      await callbacks.close();
    },
  };
}

/**
 * The browser chat (channels/web) as its page drives it: a message is posted with the page's
 * own id, and posted again with that id while the post fails (the person pressing Send again);
 * replies are the message events the operator's pages get.
 */
export async function webChannel(): Promise<WalkChannel> {
  const { createWebChannel } = await import('../../channels/web/index.ts');
  let current: ReturnType<typeof createWebChannel> | undefined;
  let unsubscribe: (() => void) | undefined;
  const replies: string[] = [];
  let loseAnswer = false;
  return {
    name: 'web',
    async build(context) {
      unsubscribe?.();
      current = createWebChannel(context);
      unsubscribe = current.subscribe('ada', (event) => {
        if (event.type === 'message') replies.push(event.text);
      });
      return current;
    },
    async say(text) {
      const id = `walk_${text.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
      if (loseAnswer) {
        loseAnswer = false;
        await current!.post('ada', text, [], id).catch(() => undefined); // taken; the page never hears
      }
      await untilTaken(`the web channel never took ${text}`, 150, async () => {
        await current!.post('ada', text, [], id);
        return true;
      });
    },
    replies: () => replies,
    loseNextAck: () => void (loseAnswer = true),
    close: async () => unsubscribe?.(),
  };
}

/** Sends again (every 100 ms, at most `attempts` times) until `send` says it was taken; a throw is a failed send. */
async function untilTaken(what: string, attempts: number, send: (attempt: number) => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      if (await send(attempt)) return;
    } catch {
      // the connection or the store failed: send it again
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(what);
}

/** POSTs and drops the connection as soon as the answer starts: the request was taken, its answer lost. */
async function lostAnswer(url: string, headers: Record<string, string>, body: string): Promise<void> {
  const { request } = await import('node:http');
  await new Promise<void>((resolve) => {
    const req = request(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (response) => {
      response.destroy();
      resolve();
    });
    req.on('error', () => resolve());
    req.end(body);
  });
}

/** The email peer, with the bot's \Seen flag on a mail removable (as when the channel's STORE was lost). */
export async function emailPeer(): Promise<ChatPeer & { undoSeen(text: string): Promise<{ settled(): Promise<void> }> }> {
  const { startEmailPeer } = await import('../peers/email.ts');
  const peer = await startEmailPeer();
  const inbox = async () => peer.readFolder(peer.bot, 'INBOX');
  return Object.assign(peer, {
    async undoSeen(text: string) {
      const mail = (await inbox()).find((m) => m.text.trimStart().startsWith(text));
      if (!mail) throw new Error(`no mail "${text}" in the bot's INBOX`);
      await peer.markUnseen(peer.bot, 'INBOX', mail.messageId);
      return {
        // the channel finds it unread on its next look (IDLE or its poll) and marks it again
        async settled() {
          const deadline = Date.now() + 20_000;
          for (;;) {
            const again = (await inbox()).find((m) => m.messageId === mail.messageId);
            if (again?.flags.has('\\Seen')) return;
            if (Date.now() > deadline) throw new Error(`the channel never read "${text}" again`);
            await new Promise((resolve) => setTimeout(resolve, 250));
          }
        },
      };
    },
  });
}
