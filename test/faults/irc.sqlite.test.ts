/** The fault walk (test/contracts/fault-walk.ts): IRC (a real ngircd) on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startIrcPeer } from '../peers/irc.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startIrcPeer()));
