/** The fault walk (test/contracts/fault-walk.ts): the browser chat (channels/web) as its page drives it, on SQLite. */
import { runFaultWalk } from '../contracts/fault-walk.ts';
import { sqliteEngine, webChannel } from '../support/walk.ts';

runFaultWalk(sqliteEngine, webChannel);
