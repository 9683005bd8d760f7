/** The fault walk (test/contracts/fault-walk.ts): Discord on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startDiscordPeer } from '../peers/discord.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startDiscordPeer()));
