/**
 * The console's live feed: one Server-Sent Events stream per open page. It carries the
 * Overview's numbers every two seconds, the operator's own chat events (a reply as it is
 * written), and — when the page asks with `?logs=1` — every new log line. It lives no longer
 * than its session: closed at sign-out, at expiry, and at the first tick or line that finds
 * the session no longer in force (the token changed), so nothing flows to a signed-out page.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Session } from './auth.ts';
import type { ConsoleDeps } from './deps.ts';
import { securityHeaders } from './http.ts';

/** How often the Overview's numbers are sent. */
const overviewEveryMs = 2000;
/** Lines of the log sent at most per second to one page (a debug-level burst is cut, and says so). */
const maxLogLinesPerSecond = 200;

/** How the stream follows its session (src/console/auth.ts). */
export interface StreamSession {
  /** Whether the session is still in force. */
  current(): boolean;
  /** Calls `ended` at sign-out; returns the unsubscribe. */
  onSignOut(ended: () => void): () => void;
}

/** Longest timer Node takes (about 24.8 days); a later expiry is caught by the tick. */
const maxTimerMs = 2 ** 31 - 1;

export function openStream(request: IncomingMessage, response: ServerResponse, deps: ConsoleDeps, session: Session, url: URL, following: StreamSession): void {
  response.writeHead(200, { ...securityHeaders, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  response.socket?.setNoDelay(true);
  let open = true;
  const timers: Array<ReturnType<typeof setTimeout>> = [];
  const stops: Array<() => void> = [];
  /** Every write asks first: a session that ended closes the stream instead. */
  const live = (): boolean => {
    if (open && !following.current()) end();
    return open;
  };
  const write = (event: string, data: unknown): void => {
    if (live()) response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const overview = async (): Promise<void> => {
    try {
      write('overview', await deps.overview());
    } catch (error) {
      deps.log.warn({ err: error }, 'console: the overview could not be read');
    }
  };
  void overview();
  timers.push(setInterval(() => live() && void overview(), overviewEveryMs), setInterval(() => live() && response.write(': keep-alive\n\n'), 15_000));
  stops.push(following.onSignOut(() => end()));
  // (+50 ms: the session is no longer in force when the timer fires, not a moment before)
  if (Number.isFinite(session.expiresAt)) timers.push(setTimeout(() => live(), Math.min(maxTimerMs, Math.max(0, session.expiresAt - Date.now()) + 50)));
  if (deps.chat && !session.bearer) stops.push(deps.chat.subscribe(session.operator, (event) => write('chat', event)));
  if (deps.logs && url.searchParams.get('logs') === '1') {
    let second = 0;
    let sent = 0;
    stops.push(
      deps.logs.subscribe((line) => {
        const now = Math.floor(Date.now() / 1000);
        if (now !== second) {
          if (sent > maxLogLinesPerSecond) write('log-dropped', { count: sent - maxLogLinesPerSecond });
          second = now;
          sent = 0;
        }
        if (++sent <= maxLogLinesPerSecond) write('log', line);
      }),
    );
  }
  function close(): void {
    if (!open) return;
    open = false;
    for (const timer of timers) clearTimeout(timer);
    for (const stop of stops) stop();
  }
  /** Ends the stream from this side: the page's EventSource reconnects, gets 401 and stops. */
  function end(): void {
    close();
    response.end();
  }
  request.on('close', close);
  response.on('close', close);
  response.on('error', close);
}
