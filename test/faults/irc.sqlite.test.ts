/** The fault walk (test/contracts/fault-walk.ts): IRC (a real ngircd) on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startIrcPeer } from '../peers/irc.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startIrcPeer()), {
  lostAtRestart: [{ step: /accept/, why: 'IRC cannot send a line again: one held while the store refused it is gone if the daemon stops first (README, IRC)' }],
});
