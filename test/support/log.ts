/** A logger for tests: silent unless SWITCHBOARD_TEST_LOG is set to a level. */
import { pino, type Logger } from 'pino';

export function testLogger(): Logger {
  return pino({ level: process.env.SWITCHBOARD_TEST_LOG ?? 'silent' }, pino.destination(2));
}
