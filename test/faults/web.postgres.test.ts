/** The fault walk (test/contracts/fault-walk.ts): the browser chat (channels/web) as its page drives it, on PostgreSQL (store and pg-boss turn queue). */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { postgresEngine, webChannel } from '../support/walk.ts';

runFaultWalk(postgresEngine, webChannel);
