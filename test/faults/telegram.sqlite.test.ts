/** The fault walk (test/contracts/fault-walk.ts): Telegram on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startTelegramPeer } from '../peers/telegram.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startTelegramPeer(), 'poll_timeout_seconds = 1\n'));
