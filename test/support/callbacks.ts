/** A local HTTP endpoint that records the bodies POSTed to it (a webhook's callback_url). */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CallbackReceiver {
  /** `http://127.0.0.1:<port>/replies` */
  readonly url: string;
  /** Every body received, in order. */
  readonly bodies: string[];
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 (a free port); answers 204 to everything. */
export async function startCallbackReceiver(): Promise<CallbackReceiver> {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      bodies.push(body);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/replies`,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
