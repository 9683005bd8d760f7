/** The fault walk (test/contracts/fault-walk.ts): the signed webhook behind a real gateway, on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { postgresEngine, webhookChannel } from '../support/walk.ts';

runFaultWalk(postgresEngine, webhookChannel);
