/** The engines and channels the fault walk (test/contracts/fault-walk.ts) runs on. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Channel, ChannelContext } from '../../src/channel.ts';
import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
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
      queue: () => createPgBossQueue({ url, log, concurrency: 4, heartbeatSeconds: 10, turnTimeoutSeconds: 60 }),
      close: async () => {
        await database.close();
        server.stop();
      },
    };
  },
};

type Factory = (config: Config, context: ChannelContext) => Promise<Channel>;
const factories: Record<string, Factory> = {
  telegram: async (config, context) => (await import('../../channels/telegram/index.ts')).createTelegramChannel(config.channels.telegram!, context),
  discord: async (config, context) => (await import('../../channels/discord/index.ts')).createDiscordChannel(config.channels.discord!, context),
  slack: async (config, context) => (await import('../../channels/slack/index.ts')).createSlackChannel(config.channels.slack!, context),
  matrix: async (config, context) => (await import('../../channels/matrix/index.ts')).createMatrixChannel(config.channels.matrix!, context),
  irc: async (config, context) => (await import('../../channels/irc/index.ts')).createIrcChannel(config.channels.irc!, context),
  email: async (config, context) => (await import('../../channels/email/index.ts')).createEmailChannel(config.channels.email!, context),
};

/** A chat peer's channel, built from the peer's own config section as the daemon would, talked to in a DM by alice. */
export function peerChannel(peer: ChatPeer, extra = ''): WalkChannel {
  const place: Place = { kind: 'dm', user: 'alice' };
  const text = `data_dir = "./data"\n[agent]\nname = "Testbot"\n[provider]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "k"\n${peer.configSection()}allow = ["${peer.users.alice}"]\n${extra}`;
  const config = parseConfig(text, undefined, {});
  const factory = factories[peer.channel];
  if (!factory) throw new Error(`no walk factory for ${peer.channel}`);
  return {
    name: peer.channel,
    build: (context) => factory(config, context),
    say: (message) => peer.post('alice', place, message),
    replies: () => peer.botMessages(place).map((message) => message.text),
    close: () => peer.close(),
  };
}
