/** The fault walk (test/contracts/fault-walk.ts): IRC (a real ngircd) on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startIrcPeer } from '../peers/irc.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startIrcPeer()), {
  lostAtRestart: [{ step: /accept/, why: 'IRC cannot send a line again: one held while the store refused it is gone if the daemon stops first (README, IRC)' }],
});
