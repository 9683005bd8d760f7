/** The fault walk (test/contracts/fault-walk.ts): Slack on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startSlackPeer } from '../peers/slack.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startSlackPeer()));
