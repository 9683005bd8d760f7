/** The fault walk (test/contracts/fault-walk.ts): the signed webhook behind a real gateway, on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { sqliteEngine, webhookChannel } from '../support/walk.ts';

runFaultWalk(sqliteEngine, webhookChannel);
