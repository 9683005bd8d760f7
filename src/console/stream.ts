/**
 * The console's live feed: one Server-Sent Events stream per open page. It carries the
 * Overview's numbers every two seconds, the operator's own chat events (a reply as it is
 * written), and — when the page asks with `?logs=1` — every new log line.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Session } from './auth.ts';
import type { ConsoleDeps } from './deps.ts';
import { securityHeaders } from './http.ts';

/** How often the Overview's numbers are sent. */
const overviewEveryMs = 2000;
/** Lines of the log sent at most per second to one page (a debug-level burst is cut, and says so). */
const maxLogLinesPerSecond = 200;

export function openStream(request: IncomingMessage, response: ServerResponse, deps: ConsoleDeps, session: Session, url: URL): void {
  response.writeHead(200, { ...securityHeaders, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  response.socket?.setNoDelay(true);
  let open = true;
  const write = (event: string, data: unknown): void => {
    if (open) response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const overview = async (): Promise<void> => {
    try {
      write('overview', await deps.overview());
    } catch (error) {
      deps.log.warn({ err: error }, 'console: the overview could not be read');
    }
  };
  void overview();
  const timers = [setInterval(() => void overview(), overviewEveryMs), setInterval(() => open && response.write(': keep-alive\n\n'), 15_000)];
  const stops: Array<() => void> = [];
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
  const close = (): void => {
    if (!open) return;
    open = false;
    for (const timer of timers) clearInterval(timer);
    for (const stop of stops) stop();
  };
  request.on('close', close);
  response.on('close', close);
  response.on('error', close);
}
