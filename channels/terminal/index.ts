/**
 * The terminal channel: each line typed (or piped) on stdin is a message of one
 * conversation, each reply is printed. Used by `switchboard chat`, and by `start` when
 * `[channels.terminal]` is configured.
 *
 * It skips interrupted turns (see SkipsInterrupted): what an earlier session left unanswered
 * is not answered late — at a prompt the person is told what it was, and may ask again.
 *
 * At a terminal a message may have several lines: a pasted block is one message (bracketed
 * paste, xterm's "Bracketed Paste Mode": with ESC[?2004h written, the terminal wraps a paste in
 * ESC[200~ … ESC[201~, which Node's readline reports as the keys `paste-start` / `paste-end`;
 * https://invisible-island.net/xterm/ctlseqs/ctlseqs.html#h2-Bracketed-Paste-Mode), sent with
 * the Enter after it; and a line typed with a trailing `\` goes on on the next line (`… `).
 * /help at the terminal says so. Piped input stays one message per line.
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { Channel, InboundMessage, ListenLink, OutboundMessage, Push, SkipsInterrupted } from '../../src/channel.ts';
import { diskFullCode } from '../../src/disk-full.ts';

/** How often a line refused for a full disk is offered again. */
const DISK_FULL_RETRY_MS = 2000;

export interface TerminalChannelOptions {
  readonly input: Readable;
  readonly output: Writable;
  /** The person at the terminal: the sender id and the conversation's chat id. */
  readonly user: string;
  /** Name printed before replies in interactive mode. */
  readonly assistantName: string;
  /** Show a prompt and name replies (a human at a TTY) or print bare replies (a pipe). */
  readonly interactive: boolean;
  /** One line shown above the first prompt in interactive mode: who this is, how to quit. */
  readonly banner?: string;
  /** Called once when the input has ended (Ctrl-D or end of the pipe); returns a line to show at a prompt, if any. */
  readonly onEnd?: () => string | undefined;
  /**
   * Ctrl-C at the prompt (interactive mode, where the terminal is in raw mode and no SIGINT is
   * sent): returns a line to show, if any. Without it, Ctrl-C ends the input like Ctrl-D.
   */
  readonly onInterrupt?: () => string | undefined;
}

/** What /help adds at the terminal: how to write a message of several lines. */
export const multiLineHelp = 'At this terminal: end a line with \\ to go on on the next one; a pasted block of lines is one message (Enter sends it).';

const PASTE_ON = '\x1b[?2004h';
const PASTE_OFF = '\x1b[?2004l';

export function createTerminalChannel(options: TerminalChannelOptions): Channel & SkipsInterrupted {
  const prompt = '› ';
  const more = '… ';
  /** Ids of this session's /help messages: their answer gets the line above. */
  const helpAsked = new Set<string>();
  let reader: ReturnType<typeof createInterface> | undefined;
  let ended = false;
  let greeted = false;
  /** Lines shown once, above the first prompt. */
  const notices: string[] = options.banner === undefined ? [] : [options.banner];
  /**
   * Ids this session pushed and has not seen answered yet: a reply to any other message is one
   * the last session did not show. A message's answer comes once (only a reply's first part
   * names it), so the set holds what is in flight, not the whole session.
   */
  const awaiting = new Set<string>();
  const write = (text: string): Promise<void> => new Promise((resolve, reject) => options.output.write(text, (error) => (error ? reject(error) : resolve())));

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
      const onInterrupt = options.onInterrupt;
      if (options.interactive && onInterrupt) {
        reader.on('SIGINT', () => {
          const note = onInterrupt();
          options.output.write(note === undefined ? '\n' : `\n${note}\n`);
        });
      }
      // Whether each line, in order, arrived inside a paste: noted when readline emits it, as
      // the loop below reads lines later (the whole paste has usually been parsed by then).
      const pasted: boolean[] = [];
      let pasting = false;
      let pastedLines = 0;
      const onLine = (): void => {
        pasted.push(pasting);
        if (pasting) pastedLines++;
      };
      const onKey = (_: unknown, key: { name?: string } | undefined): void => {
        if (key?.name === 'paste-start') {
          pasting = true;
          pastedLines = 0;
        } else if (key?.name === 'paste-end') {
          pasting = false;
          // The paste's last line waits for Enter: show it as a continuation.
          if (pastedLines > 0) {
            reader?.setPrompt(more);
            reader?.prompt(true);
          }
        }
      };
      if (options.interactive) {
        options.input.on('keypress', onKey);
        options.output.write(PASTE_ON);
      }
      if (options.interactive && !greeted && notices.length > 0) await write(`${notices.join('\n')}\n\n`);
      greeted = true;
      // Registered in the same tick as the loop's own listener, so both see the same lines.
      reader.on('line', onLine);
      link.ready();
      if (options.interactive) reader.prompt();
      const onAbort = (): void => reader?.close();
      signal.addEventListener('abort', onAbort, { once: true });
      /** Lines of the message being written (pasted, or ended with `\`). */
      const lines: string[] = [];
      try {
        for await (const line of reader) {
          link.alive();
          const inPaste = pasted.shift() === true;
          if (options.interactive && (inPaste || line.endsWith('\\'))) {
            lines.push(inPaste ? line : line.slice(0, -1));
            if (!inPaste) {
              reader.setPrompt(more);
              reader.prompt();
            }
            continue;
          }
          // Several lines keep their indentation (pasted code); only blank lines around go.
          const text = lines.length === 0 ? line.trim() : [...lines, line].join('\n').replace(/^(?:[ \t]*\n)+/, '').trimEnd();
          lines.length = 0;
          if (options.interactive) reader.setPrompt(prompt);
          if (text === '') {
            if (options.interactive) reader.prompt();
            continue;
          }
          const id = randomUUID();
          awaiting.add(id);
          if (/^[/!]help$/i.test(text)) helpAsked.add(id);
          const message: InboundMessage = { channel: 'terminal', account: 'local', chat: options.user, id, sender: { id: options.user, name: options.user }, text, timestamp: Date.now() };
          // A full disk refuses the line without storing it; no platform will send it again,
          // so it is held here and offered again until there is room (or shutdown).
          for (let told = false; ; told = true) {
            try {
              await push(message);
              break;
            } catch (error) {
              if (diskFullCode(error) === undefined || signal.aborted) throw error;
              if (!told) await write(`(The disk is full, so your message cannot be stored yet; it waits here and goes through once there is room.)\n`);
              await new Promise((resolve) => setTimeout(resolve, DISK_FULL_RETRY_MS));
            }
          }
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        options.input.off('keypress', onKey);
        if (options.interactive) options.output.write(PASTE_OFF);
        reader = undefined;
      }
      if (signal.aborted) return;
      ended = true;
      const note = options.onEnd?.();
      // Ctrl-D leaves the cursor after the prompt.
      if (options.interactive) await write(note === undefined ? '\n' : `\n${note}\n`);
      // Stay "running" until shutdown: an ended input is not a dropped connection.
      return waitForAbort(signal);
    },

    async send(message: OutboundMessage): Promise<void> {
      const earlier = message.replyTo !== undefined && !awaiting.has(message.replyTo);
      const help = options.interactive && message.replyTo !== undefined && helpAsked.has(message.replyTo);
      const body = help ? `${message.text}\n${multiLineHelp}` : message.text;
      const text = options.interactive ? `\n${options.assistantName}${earlier ? ' (a reply your last chat did not show)' : ''}: ${body}\n\n` : `${message.text}\n`;
      await write(text);
      if (message.replyTo !== undefined) {
        // answered (a failed write is retried as it was)
        awaiting.delete(message.replyTo);
        helpAsked.delete(message.replyTo);
      }
      if (options.interactive && reader && !ended) reader.prompt(true);
    },

    skipInterrupted(messages: readonly InboundMessage[]): void {
      const mine = messages.filter((message) => message.chat === options.user);
      if (mine.length > 0) notices.push(unansweredNotice(mine.map((message) => message.text)));
    },
  };
}

/** What the person is told about the questions an earlier session stopped before answering. */
export function unansweredNotice(texts: readonly string[]): string {
  const shown = texts.slice(0, 3).map((text) => `“${clip(text, 60)}”`);
  const more = texts.length - shown.length;
  const list = `${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
  return texts.length === 1
    ? `Earlier, you asked ${list}; the chat stopped before answering it. Ask again if you still want an answer.`
    : `Earlier, you asked ${list}; the chat stopped before answering them. Ask again if you still want answers.`;
}

function clip(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ');
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`;
}

function waitForAbort(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
