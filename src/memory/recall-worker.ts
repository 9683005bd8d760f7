/**
 * The recall worker thread: binary vector scan and keyword search off the event loop, on its
 * own read-only connection to the daemon's database (WAL lets it read while the daemon writes).
 * Started by recall-client.ts; see recall-protocol.ts for the messages.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { ToWorker, WorkerConfig } from './recall-protocol.ts';
import { RecallService } from './recall-service.ts';

if (parentPort !== null) {
  const port = parentPort;
  const config = workerData as WorkerConfig;
  const started = performance.now();
  const db = new Database(config.path, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const service = new RecallService(db, config.model);
  const indexed = service.load();
  // Changes posted while loading wait in the port's queue until this listener exists.
  port.on('message', (message: ToWorker) => {
    const reply = service.handle(message);
    if (reply !== undefined) port.postMessage(reply);
  });
  port.postMessage({ type: 'ready', indexed, ms: performance.now() - started });
}
