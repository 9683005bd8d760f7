/** The fault walk (test/contracts/fault-walk.ts): email (real postfix + dovecot) on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { emailPeer, peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await emailPeer()));
