/** Reading a request body under a size limit and a deadline: the gateway's routes and the console's API. */
import type { IncomingMessage } from 'node:http';

/** A request body over the limit (answer 413 and close: the rest is not read). */
export class BodyTooLarge extends Error {}

/** A request body that did not arrive in time (answer 408 and close). */
export class BodyTimeout extends Error {}

/** Reads at most `max` bytes of a request body; rejects with BodyTooLarge past that, BodyTimeout after `timeoutMs`. */
export function readBody(request: IncomingMessage, max: number, timeoutMs = Infinity): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > max) {
      reject(new BodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = Number.isFinite(timeoutMs) ? setTimeout(() => fail(new BodyTimeout()), timeoutMs) : undefined;
    const fail = (error: Error): void => {
      clearTimeout(timer);
      request.removeAllListeners('data');
      reject(error);
    };
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) return fail(new BodyTooLarge());
      chunks.push(chunk);
    });
    request.on('end', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
    request.on('error', fail);
  });
}

/** True when a request says a body follows (a GET's is never read). */
export function declaresBody(request: IncomingMessage): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
