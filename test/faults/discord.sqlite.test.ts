/** The fault walk (test/contracts/fault-walk.ts): Discord on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startDiscordPeer } from '../peers/discord.ts';
import { DISCORD_LIFTED } from '../peers/discord-ratelimit.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

// The platform's rate limits are lifted: the walk is about durability, and waiting them out only
// makes it slow (Matrix 563 s against 49 s); the chat contract's flood test holds the limits.
runFaultWalk(sqliteEngine, async () => peerChannel(await startDiscordPeer({ rateLimits: DISCORD_LIFTED })));
