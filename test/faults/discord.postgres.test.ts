/** The fault walk (test/contracts/fault-walk.ts): Discord on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startDiscordPeer } from '../peers/discord.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startDiscordPeer()));
