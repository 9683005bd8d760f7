/** The fault walk (test/contracts/fault-walk.ts): email (real postfix + dovecot) on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startEmailPeer } from '../peers/email.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startEmailPeer()));
