/**
 * The SIGKILL loop shared by every chat platform (test/kill-loop.e2e.test.ts): people keep
 * writing in several conversations at a steady pace while the real daemon is SIGKILLed at
 * random moments (a seeded PRNG, the seed printed) and restarted at once on the same data_dir.
 * Then every message must be answered exactly once, and the replies of each conversation must
 * come in the order of its messages.
 *
 * What differs per platform (how a person writes, what the bot posted, which messages the
 * platform itself can lose) is a {@link KillLoopAdapter}; the loop and the judgement are here.
 *
 * Each message carries a token (`note-<n>`); the scripted model answers `got note-<n>` after a
 * random delay, so kills land before, during and after turns and sends.
 */
import { lastUserText, type FakeOpenAI } from '../fixtures/fake-openai.ts';
import { startDaemon, tempConfig, type Daemon } from './cli.ts';

/** One conversation's bot replies as the platform shows them, in order. */
export type Replies = () => readonly string[];

export interface KillLoopAdapter {
  /** Conversation names, e.g. "dm:alice" (each one is a separate conversation of the daemon). */
  readonly conversations: readonly string[];
  /** The `[channels.<name>]` section with its policy keys (allow, …). */
  configSection(): string;
  /** A person writes `text` in `conversation`; resolves once the platform has it. */
  send(conversation: string, text: string): Promise<void>;
  /** The bot's replies in `conversation` so far, in the order the platform shows them. */
  replies(conversation: string): readonly string[];
  /**
   * Messages the platform itself may drop, so that nobody could answer them: return false
   * for those (default: every message must be answered). IRC has no acknowledgement and no
   * redelivery: a line that reaches a dead connection, or a channel the bot has not joined
   * yet, is gone.
   */
  mustAnswer?(message: SentMessage, kills: readonly number[]): boolean;
  /**
   * The documented at-least-once window of a platform whose sends are not idempotent
   * (README, "What is guaranteed"): a kill after the platform took a reply but before the
   * outbox recorded it sent makes the restarted daemon send it once more. A second copy is
   * forgiven only when a kill fell within [first seen − beforeMs, first seen + afterMs] and
   * the copies are adjacent. Absent: no second copy is ever forgiven.
   */
  readonly resendWindow?: { readonly beforeMs: number; readonly afterMs: number };
  /**
   * Messages the platform itself delivered late — a retry after a missed ack deadline (Slack
   * sends an event again 3 s after it went unacknowledged, while later events flow on): their
   * replies may come after later messages' (the daemon never had them before the retry). They
   * are still answered exactly once. Absent: every reply must come in order.
   */
  lateByPlatform?(): ReadonlySet<number>;
  /** Called right after each (re)start is ready, e.g. to wait until the bot joined (must give up once the daemon is killed). */
  afterStart?(daemon: Daemon): Promise<void>;
}

export interface KillLoopOptions {
  readonly model: FakeOpenAI;
  /** Printed with the outcome; set KILL_LOOP_SEED to replay one run. */
  readonly seed: number;
  /** Messages at least (more while kills are still due, up to twice as many). */
  readonly messages: number;
  readonly kills: number;
  /** Between two messages (all conversations together). */
  readonly paceMs: number;
  /** A kill comes this long (uniformly random) after the daemon was ready. */
  readonly killAfterMs: readonly [number, number];
  /** The model answers after this long (uniformly random). @default [0, 400] */
  readonly modelDelayMs?: readonly [number, number];
  /** How long the last daemon may take to answer what is left. @default 45000 */
  readonly drainMs?: number;
  readonly env: NodeJS.ProcessEnv;
  /** Progress lines (t.diagnostic). */
  readonly note?: (line: string) => void;
}

export interface SentMessage {
  readonly n: number;
  readonly conversation: string;
  readonly text: string;
  /** When the person started sending it, and when the platform had it. */
  readonly startedAt: number;
  readonly sentAt: number;
}

export interface KillLoopOutcome {
  readonly seed: number;
  readonly sent: readonly SentMessage[];
  readonly kills: readonly number[];
  /** Messages that had to be answered (all but those the platform may drop). */
  readonly required: number;
  readonly seconds: number;
  /** Replies seen twice within the platform's documented resend window. */
  readonly forgivenDoubles: readonly string[];
  /** Messages the platform dropped (mustAnswer false) and that went unanswered. */
  readonly droppedByPlatform: readonly number[];
  readonly problems: readonly string[];
}

/** mulberry32: a small seeded PRNG, so a failing run can be replayed with its seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The seed for this run: KILL_LOOP_SEED when set, else a fresh one. */
export const killLoopSeed = (): number => (process.env.KILL_LOOP_SEED ? Number(process.env.KILL_LOOP_SEED) : Math.floor(Math.random() * 2 ** 31));

const TOKEN = /note-(\d+)/;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const between = (random: () => number, [low, high]: readonly [number, number]): number => low + Math.floor(random() * (high - low + 1));


/** Runs the loop; the caller asserts `problems` is empty (the outcome says everything else). */
export async function runKillLoop(adapter: KillLoopAdapter, options: KillLoopOptions): Promise<KillLoopOutcome> {
  const random = prng(options.seed);
  const started = Date.now();
  const { model } = options;
  model.fallback = (request) => {
    const n = TOKEN.exec(lastUserText(request))?.[1];
    return { text: n === undefined ? 'got no note' : `got note-${n}`, delayMs: between(random, options.modelDelayMs ?? [0, 400]) };
  };
  const config = tempConfig(
    model.baseUrl,
    `[log]\nformat = "json"\n[runtime]\nrestart_initial_seconds = 0.2\nrestart_max_seconds = 1\n${adapter.configSection()}`,
  );
  const sent: SentMessage[] = [];
  const kills: number[] = [];
  let daemon: Daemon | undefined;
  // Each reply's first sighting (per conversation, by index): what the resend window is measured from.
  const seen = new Map<string, number[]>(adapter.conversations.map((c) => [c, []]));
  const watch = (): void => {
    for (const conversation of adapter.conversations) {
      const times = seen.get(conversation)!;
      const count = adapter.replies(conversation).length;
      while (times.length < count) times.push(Date.now());
    }
  };
  const watcher = setInterval(watch, 10);

  /** Starts a daemon on the same config; resolves once it is ready (and the adapter is satisfied). */
  const launch = (): { daemon: Daemon; ready: Promise<void> } => {
    const child = startDaemon(['start', '--config', config.file], { env: options.env });
    daemon = child;
    const ready = (async () => {
      const deadline = Date.now() + 30_000;
      while (!/"msg":"ready"/.test(child.stdout())) {
        if (child.child.signalCode === 'SIGKILL') return; // killed while starting: that was the point
        if (child.child.exitCode !== null || child.child.signalCode !== null) throw new Error(`the daemon exited by itself (code ${child.child.exitCode}, signal ${child.child.signalCode})`);
        if (Date.now() > deadline) throw new Error('the daemon was not ready within 30 s');
        await sleep(20);
      }
      await adapter.afterStart?.(child);
    })();
    return { daemon: child, ready };
  };
  const tail = (): string => `\nlast daemon stdout:\n${daemon?.stdout().slice(-6000)}\nstderr:\n${daemon?.stderr().slice(-2000)}`;
  let stopped = false;

  try {
    let current = launch();
    await current.ready;
    let sending = true;
    const sender = (async () => {
      try {
        // At least `messages`, and on until the last kill (at most twice as many), so messages keep coming through every kill.
        for (let n = 1; (n <= options.messages || kills.length < options.kills) && n <= 2 * options.messages && !stopped; n++) {
          const conversation = adapter.conversations[Math.floor(random() * adapter.conversations.length)]!;
          const text = `note-${n} in ${conversation}`;
          const startedAt = Date.now();
          await adapter.send(conversation, text);
          sent.push({ n, conversation, text, startedAt, sentAt: Date.now() });
          await sleep(options.paceMs);
        }
      } finally {
        sending = false;
      }
    })();
    sender.catch(() => undefined); // awaited below; this only keeps an early failure from going unhandled
    // Kill at random moments, restarting at once, until enough kills and every message is out.
    // One kill in four lands while the daemon is still starting (recovering the last run's work).
    while (kills.length < options.kills || sending) {
      if (kills.length >= options.kills) {
        await Promise.race([sender, sleep(100)]);
        continue;
      }
      if (random() < 0.25) await sleep(between(random, [100, 1500]));
      else {
        await current.ready;
        await sleep(between(random, options.killAfterMs));
      }
      const victim = current.daemon;
      if (victim.child.exitCode !== null || victim.child.signalCode !== null) {
        throw new Error(`the daemon exited by itself (code ${victim.child.exitCode}, signal ${victim.child.signalCode})`);
      }
      victim.child.kill('SIGKILL');
      kills.push(Date.now());
      await victim.exited;
      await current.ready.catch(() => undefined);
      options.note?.(`kill ${kills.length} at ${((kills.at(-1)! - started) / 1000).toFixed(1)} s (${sent.length} messages sent)`);
      current = launch();
    }
    await current.ready;
    await sender;

    // The last daemon answers what is left.
    const required = (): SentMessage[] => sent.filter((m) => adapter.mustAnswer?.(m, kills) ?? true);
    const unanswered = (): SentMessage[] => required().filter((m) => !adapter.replies(m.conversation).some((r) => TOKEN.exec(r)?.[1] === String(m.n)));
    const deadline = Date.now() + (options.drainMs ?? 45_000);
    while (unanswered().length > 0 && Date.now() < deadline) await sleep(50);
    await sleep(1500); // a late second copy would show up now
    watch();
    const missing = unanswered();

    daemon!.child.kill('SIGTERM');
    const { code } = await daemon!.exited;
    const problems: string[] = [];
    if (code !== 0) problems.push(`the last daemon exited with ${code} on SIGTERM`);
    if (missing.length > 0) problems.push(`never answered (${missing.length}): ${missing.map((m) => `${m.n} (${m.conversation})`).join(', ')}`);
    const judged = judge(adapter, sent, kills, seen);
    problems.push(...judged.problems);
    const answered = new Set(adapter.conversations.flatMap((c) => adapter.replies(c).map((r) => TOKEN.exec(r)?.[1])));
    const dropped = sent.filter((m) => !(adapter.mustAnswer?.(m, kills) ?? true) && !answered.has(String(m.n))).map((m) => m.n);
    const seconds = (Date.now() - started) / 1000;
    if (problems.length > 0) problems.push(`seed ${options.seed}; replies: ${JSON.stringify(Object.fromEntries(adapter.conversations.map((c) => [c, adapter.replies(c)])))}${tail()}`);
    return { seed: options.seed, sent, kills, required: required().length, seconds, forgivenDoubles: judged.forgiven, droppedByPlatform: dropped, problems };
  } catch (error) {
    throw new Error(`kill loop (seed ${options.seed}) failed after ${kills.length} kills: ${error instanceof Error ? error.message : String(error)}${tail()}`, { cause: error });
  } finally {
    stopped = true;
    clearInterval(watcher);
    if (daemon && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
    config.cleanup();
  }
}

/**
 * Exactly once and in order, per conversation; a second copy only within the resend window.
 * `seen` holds, per conversation, when each reply was first seen. (Exported for its own test.)
 */
export function judge(adapter: Pick<KillLoopAdapter, 'conversations' | 'replies' | 'resendWindow' | 'lateByPlatform'>, sent: readonly SentMessage[], kills: readonly number[], seen: ReadonlyMap<string, readonly number[]>): { problems: string[]; forgiven: string[] } {
  const problems: string[] = [];
  const forgiven: string[] = [];
  for (const conversation of adapter.conversations) {
    const replies = adapter.replies(conversation);
    const times = seen.get(conversation)!;
    const mine = new Set(sent.filter((m) => m.conversation === conversation).map((m) => m.n));
    const order: number[] = [];
    replies.forEach((reply, index) => {
      const n = Number(TOKEN.exec(reply)?.[1] ?? Number.NaN);
      if (!mine.has(n)) return void problems.push(`${conversation}: reply ${JSON.stringify(reply)} answers no message of this conversation`);
      if (order.at(-1) !== n) return void order.push(n);
      // The same reply twice in a row: only the documented resend window explains that.
      const first = times[index - 1] ?? 0;
      const window = adapter.resendWindow;
      const kill = window === undefined ? undefined : kills.find((at) => at >= first - window.beforeMs && at <= first + window.afterMs && at <= (times[index] ?? Infinity));
      if (kill === undefined) problems.push(`${conversation}: note-${n} answered twice (no kill within its resend window)`);
      else forgiven.push(`${conversation}: note-${n} (kill ${kill - first} ms after the first copy was seen)`);
    });
    const counts = new Map<number, number>();
    for (const n of order) counts.set(n, (counts.get(n) ?? 0) + 1);
    const doubled = [...counts].filter(([, count]) => count > 1).map(([n]) => n);
    if (doubled.length > 0) problems.push(`${conversation}: answered again later, not in a row: ${doubled.join(', ')}`);
    const late = adapter.lateByPlatform?.() ?? new Set<number>();
    const inOrder = order.filter((n) => !late.has(n));
    const sorted = [...inOrder].sort((a, b) => a - b);
    if (inOrder.join() !== sorted.join()) problems.push(`${conversation}: replies out of order: ${order.join(', ')}${late.size > 0 ? ` (delivered late by the platform, so not ordered: ${[...late].join(', ')})` : ''}`);
  }
  return { problems, forgiven };
}
