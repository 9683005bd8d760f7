/** The fault walk (test/contracts/fault-walk.ts): email (real postfix + dovecot) on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { emailPeer, peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await emailPeer()));
