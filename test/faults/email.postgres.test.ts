/** The fault walk (test/contracts/fault-walk.ts): email (real postfix + dovecot) on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startEmailPeer } from '../peers/email.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startEmailPeer()));
