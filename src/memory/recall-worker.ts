/**
 * A recall worker thread: binary vector scan or keyword search off the event loop, on its own
 * read-only connection to the daemon's database (WAL lets it read while the daemon writes).
 * Started by recall-client.ts; see recall-protocol.ts for the messages.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { ToWorker, WorkerConfig } from './recall-protocol.ts';
import { RecallService } from './recall-service.ts';
import { RECALL_PAGE_CACHE_KIB } from '../store/page-cache.ts';
import { oldSpaceKeeper } from '../full-gc.ts';

/**
 * On Linux, nice this thread (only) to 10: where the workers and the event loop compete for
 * few cores (a Raspberry Pi, a small VPS), the event loop wins and a search never delays it.
 */
function yieldToEventLoop(): void {
  try {
    const thread = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(thread) && thread > 0) setPriority(thread, 10);
  } catch {
    // Not Linux, or not allowed: the default priority works, just with less margin.
  }
}

if (parentPort !== null) {
  const port = parentPort;
  const config = workerData as WorkerConfig;
  const started = performance.now();
  yieldToEventLoop();
  const db = new Database(config.path, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  db.pragma(`cache_size = -${RECALL_PAGE_CACHE_KIB}`);
  const service = new RecallService(db, config.model, config.maxIndexBytes);
  const indexed = service.load();
  // V8 would not collect this isolate's old generation under traffic (src/full-gc.ts): what the
  // searches promote is collected once it is 1 MB over what lived after the last collection.
  const keepHeap = oldSpaceKeeper(1024 * 1024, 256);
  // Changes posted while loading wait in the port's queue until this listener exists.
  port.on('message', (message: ToWorker) => {
    const reply = service.handle(message);
    if (reply !== undefined) port.postMessage(reply);
    keepHeap();
  });
  port.postMessage({ type: 'ready', indexed, ms: performance.now() - started });
  const full = service.takeFull();
  if (full !== undefined) port.postMessage(full);
}
