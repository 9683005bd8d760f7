/** The fault walk (test/contracts/fault-walk.ts): Matrix on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startMatrixPeer } from '../peers/matrix.ts';
import { peerChannel, postgresEngine } from '../support/walk.ts';

runFaultWalk(postgresEngine, async () => peerChannel(await startMatrixPeer()));
