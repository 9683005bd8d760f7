/**
 * The daemon's side of the recall worker: starts it, forwards index changes in commit order,
 * sends searches and matches the answers. A worker that dies is restarted (with backoff) and
 * reloads its index from the database, so no change is lost; meanwhile searches reject and the
 * caller falls back to keyword search on its own connection.
 *
 * The worker is unref'd while idle, so it never keeps a finished process alive, and ref'd
 * while a search is in flight, so an awaited recall always gets its answer.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from '../log.ts';
import type { Hit, KeywordResult } from './fts.ts';
import type { FromWorker, IndexEntry, KeywordRequest, ToWorker, VectorRequest, WorkerConfig } from './recall-protocol.ts';

export interface RecallClientOptions extends WorkerConfig {
  readonly log: Logger;
  /** A search not answered by then rejects (the caller falls back). @default 10000 */
  readonly searchTimeoutMs?: number;
}

interface Pending {
  readonly resolve: (message: FromWorker) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * The worker's own V8 heap: a small young generation (it allocates little per search; 2 MB
 * against 8 MB took 2–3 MB off the soak's highest RSS, 15,000 messages twice each, at the same
 * msg/s) and an old generation sized for its index. A worker that outgrows it is stopped by V8 and restarted
 * like any failed worker — searches fall back to the main thread meanwhile — never the daemon.
 */
function workerLimits(maxIndexBytes: number | undefined): { maxYoungGenerationSizeMb: number; maxOldGenerationSizeMb: number } {
  const indexMb = maxIndexBytes === undefined || !Number.isFinite(maxIndexBytes) ? 256 : maxIndexBytes / 1024 / 1024;
  return { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: Math.ceil(48 + indexMb * 1.5) };
}

/** Source files run as .ts (Node strips the types); the build emits .js next to this file. */
const workerUrl = new URL(import.meta.url.endsWith('.ts') ? './recall-worker.ts' : './recall-worker.js', import.meta.url);

export class RecallClient {
  private readonly options: RecallClientOptions;
  private readonly log: Logger;
  private readonly pending = new Map<number, Pending>();
  private worker: Worker | undefined;
  private nextId = 1;
  private closed = false;
  private restartDelayMs = 1000;
  private restartTimer: NodeJS.Timeout | undefined;
  private problem: string | undefined;

  /** The worker (a V8 isolate plus a connection, ~10 MB) starts on the first search, not at daemon start. */
  private started = false;

  constructor(options: RecallClientOptions) {
    this.options = options;
    this.log = options.log;
  }

  /** Why searches are failing over to the main thread, if they are. */
  get trouble(): string | undefined {
    return this.problem;
  }

  add(entries: readonly IndexEntry[]): void {
    if (entries.length > 0) this.post({ type: 'add', entries });
  }

  remove(rowids: readonly number[]): void {
    if (rowids.length > 0) this.post({ type: 'remove', rowids });
  }

  /** Rebuilds the index from the database (after another process wrote to it). */
  reload(): void {
    this.post({ type: 'reload' });
  }

  async keyword(request: KeywordRequest): Promise<KeywordResult> {
    const reply = await this.ask((id) => ({ type: 'keyword', id, request }));
    if (reply.type !== 'keyword') throw new Error(`recall worker: ${reply.type === 'failed' ? reply.error : `unexpected ${reply.type}`}`);
    return reply.result;
  }

  async vector(request: VectorRequest): Promise<Hit[]> {
    const reply = await this.ask((id) => ({ type: 'vector', id, request }));
    if (reply.type !== 'vector') throw new Error(`recall worker: ${reply.type === 'failed' ? reply.error : `unexpected ${reply.type}`}`);
    return reply.hits;
  }

  /** Vectors in the worker's index. */
  async indexed(): Promise<number> {
    const reply = await this.ask((id) => ({ type: 'size', id }));
    return reply.type === 'size' ? reply.indexed : 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.failPending(new Error('memory closed'));
    const worker = this.worker;
    this.worker = undefined;
    if (worker !== undefined) await worker.terminate();
  }

  private start(): void {
    this.started = true;
    const { path, model, maxIndexBytes } = this.options;
    const workerData: WorkerConfig = { path, model, ...(maxIndexBytes === undefined ? {} : { maxIndexBytes }) };
    const worker = new Worker(workerUrl, { workerData, resourceLimits: workerLimits(maxIndexBytes) });
    worker.unref();
    worker.on('message', (message: FromWorker) => this.receive(message));
    worker.on('error', (error) => {
      this.problem = `recall worker failed: ${error.message}`;
      this.log.error({ err: error }, 'memory recall worker failed; recall is keyword-only on the main thread until it restarts');
    });
    worker.on('exit', (code) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.problem ??= `recall worker exited with code ${code}`;
      this.failPending(new Error(this.problem));
      if (this.closed) return;
      const delay = this.restartDelayMs;
      this.restartDelayMs = Math.min(60_000, delay * 2);
      this.restartTimer = setTimeout(() => this.start(), delay);
      this.restartTimer.unref();
    });
    this.worker = worker;
  }

  private receive(message: FromWorker): void {
    if (message.type === 'full') {
      this.log.warn(
        { indexed: message.indexed, indexMb: Math.round(message.bytes / 1024 / 100) / 10 },
        'memory vector index is full ([memory] max_index_mb): newer memories are recalled by keyword only; raise max_index_mb to index them (each memory costs about dimensions/8 + 64 bytes)',
      );
      return;
    }
    if (message.type === 'ready') {
      this.problem = undefined;
      this.restartDelayMs = 1000;
      this.log.debug({ indexed: message.indexed, ms: Math.round(message.ms) }, 'memory recall worker ready');
      return;
    }
    const pending = this.pending.get(message.id);
    if (pending === undefined) return; // timed out already
    this.settle(message.id);
    pending.resolve(message);
  }

  private ask(build: (id: number) => ToWorker): Promise<FromWorker> {
    if (!this.started && !this.closed) this.start();
    const worker = this.worker;
    if (worker === undefined) return Promise.reject(new Error(this.problem ?? 'recall worker not running'));
    const id = this.nextId++;
    return new Promise<FromWorker>((resolve, reject) => {
      const timeoutMs = this.options.searchTimeoutMs ?? 10_000;
      const timer = setTimeout(() => {
        this.settle(id);
        reject(new Error(`recall worker did not answer within ${timeoutMs} ms`));
      }, timeoutMs);
      if (this.pending.size === 0) worker.ref();
      this.pending.set(id, { resolve, reject, timer });
      worker.postMessage(build(id));
    });
  }

  private settle(id: number): void {
    const pending = this.pending.get(id);
    if (pending === undefined) return;
    clearTimeout(pending.timer);
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
  }

  private failPending(error: Error): void {
    for (const [id, pending] of [...this.pending]) {
      this.settle(id);
      pending.reject(error);
    }
  }

  private post(message: ToWorker): void {
    // No worker: the next one loads the database as it is then, which already has this change.
    this.worker?.postMessage(message);
  }
}
