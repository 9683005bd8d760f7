/** The fault walk (test/contracts/fault-walk.ts): Slack on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startSlackPeer } from '../peers/slack.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startSlackPeer()));
