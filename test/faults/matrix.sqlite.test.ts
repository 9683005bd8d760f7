/** The fault walk (test/contracts/fault-walk.ts): Matrix on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { startMatrixPeer } from '../peers/matrix.ts';
import { peerChannel, sqliteEngine } from '../support/walk.ts';

runFaultWalk(sqliteEngine, async () => peerChannel(await startMatrixPeer()));
