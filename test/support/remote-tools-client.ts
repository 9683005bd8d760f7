/** A remote-tools client for tests: connects to a gateway's `/ws/tools` and queues the frames it receives. */
import { WebSocket } from 'ws';

export type Frame = Record<string, unknown> & { type: string };

export interface ToolsClient {
  readonly ws: WebSocket;
  /** The next frame received (waits for one). */
  next(): Promise<Frame>;
  /** Sends a frame: an object as JSON, a string as it is. */
  send(frame: unknown): void;
}

export async function connectToolsClient(port: number, name?: string): Promise<ToolsClient> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws/tools${name ? `?client=${name}` : ''}`);
  const queue: Frame[] = [];
  const waiting: Array<(frame: Frame) => void> = [];
  ws.on('message', (data) => {
    const frame = JSON.parse(String(data)) as Frame;
    const waiter = waiting.shift();
    if (waiter) waiter(frame);
    else queue.push(frame);
  });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  return {
    ws,
    next: () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise((resolve) => waiting.push(resolve))),
    send: (frame) => ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame)),
  };
}
