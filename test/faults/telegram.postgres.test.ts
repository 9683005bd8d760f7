/** The fault walk (test/contracts/fault-walk.ts): Telegram on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startTelegramPeer } from '../peers/telegram.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startTelegramPeer(), 'poll_timeout_seconds = 1\n'));
