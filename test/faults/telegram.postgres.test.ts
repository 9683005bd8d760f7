/** The fault walk (test/contracts/fault-walk.ts): Telegram on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startTelegramPeer } from '../peers/telegram.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

// The platform's rate limits are lifted: the walk is about durability, and waiting them out only
// makes it slow (Matrix 563 s against 49 s); the chat contract's flood test holds the limits.
runFaultWalk(postgresEngine, async () => peerChannel(await startTelegramPeer({ flood: false }), 'poll_timeout_seconds = 1\n'));
