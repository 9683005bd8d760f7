/**
 * The terminal channel: each line typed (or piped) on stdin is a message of one
 * conversation, each reply is printed. Used by `switchboard chat`, and by `start` when
 * `[channels.terminal]` is configured.
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { Channel, ListenLink, OutboundMessage, Push } from '../../src/channel.ts';

export interface TerminalChannelOptions {
  readonly input: Readable;
  readonly output: Writable;
  /** The person at the terminal: the sender id and the conversation's chat id. */
  readonly user: string;
  /** Name printed before replies in interactive mode. */
  readonly assistantName: string;
  /** Show a prompt and name replies (a human at a TTY) or print bare replies (a pipe). */
  readonly interactive: boolean;
  /** Called once when the input has ended (Ctrl-D or end of the pipe). */
  readonly onEnd?: () => void;
}

export function createTerminalChannel(options: TerminalChannelOptions): Channel {
  const prompt = '› ';
  let reader: ReturnType<typeof createInterface> | undefined;
  let ended = false;

  return {
    name: 'terminal',

    async listen(push: Push, signal: AbortSignal, link: ListenLink): Promise<void> {
      if (ended) {
        // The input already ended in an earlier listen: nothing more will come.
        link.ready();
        return waitForAbort(signal);
      }
      reader = createInterface({
        input: options.input,
        ...(options.interactive ? { output: options.output, prompt, terminal: true } : { terminal: false }),
      });
      link.ready();
      if (options.interactive) reader.prompt();
      const onAbort = (): void => reader?.close();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const line of reader) {
          link.alive();
          const text = line.trim();
          if (text === '') {
            if (options.interactive) reader.prompt();
            continue;
          }
          await push({
            channel: 'terminal',
            account: 'local',
            chat: options.user,
            id: randomUUID(),
            sender: { id: options.user, name: options.user },
            text,
            timestamp: Date.now(),
          });
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        reader = undefined;
      }
      if (signal.aborted) return;
      ended = true;
      options.onEnd?.();
      // Stay "running" until shutdown: an ended input is not a dropped connection.
      return waitForAbort(signal);
    },

    async send(message: OutboundMessage): Promise<void> {
      const text = options.interactive ? `\n${options.assistantName}: ${message.text}\n\n` : `${message.text}\n`;
      await new Promise<void>((resolve, reject) => options.output.write(text, (error) => (error ? reject(error) : resolve())));
      if (options.interactive && reader && !ended) reader.prompt(true);
    },
  };
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
