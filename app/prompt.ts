/**
 * Questions on a terminal or a pipe, for `switchboard onboard`. Answers are lines; a hidden
 * answer (an API key) is read keystroke by keystroke in raw mode at a terminal, so nothing of
 * it is echoed, and as a plain line from a pipe (tests script the answers).
 */

/** The answers ran out (end of input) while a question still needed one. */
export class InputEndedError extends Error {
  constructor(question: string) {
    super(`the input ended before an answer to "${question}"`);
    this.name = 'InputEndedError';
  }
}

/** Ctrl-C while a hidden answer was typed (raw mode turns it into a keystroke, not SIGINT). */
export class InterruptedError extends Error {
  constructor() {
    super('interrupted');
    this.name = 'InterruptedError';
  }
}

import type { Prompt } from '../src/setup/onboard.ts';

type Input = NodeJS.ReadableStream & { readonly isTTY?: boolean; setRawMode?: (raw: boolean) => unknown };

export type { Prompt } from '../src/setup/onboard.ts';

export function createPrompt(input: Input, output: NodeJS.WritableStream): Prompt {
  const tty = input.isTTY === true && typeof input.setRawMode === 'function';
  let pending = '';
  let ended = false;
  let wake: (() => void) | undefined;
  const onData = (chunk: string | Buffer): void => {
    pending += chunk.toString();
    wake?.();
  };
  const onEnd = (): void => {
    ended = true;
    wake?.();
  };
  input.setEncoding('utf8');
  input.on('data', onData);
  input.on('end', onEnd);
  const more = (): Promise<void> =>
    new Promise((resolve) => {
      wake = () => {
        wake = undefined;
        resolve();
      };
    });

  /** The next line as typed (the terminal echoes it) or piped; undefined at the end of input. */
  async function line(): Promise<string | undefined> {
    for (;;) {
      const end = pending.indexOf('\n');
      if (end >= 0) {
        const text = pending.slice(0, end).replace(/\r$/, '');
        pending = pending.slice(end + 1);
        if (!tty) output.write('\n'); // a piped answer is not echoed: end the prompt's line
        return text;
      }
      if (ended) {
        if (pending === '') return undefined;
        const text = pending;
        pending = '';
        return text;
      }
      await more();
    }
  }

  /** Keystrokes in raw mode, echoing nothing: Enter ends, Backspace and Ctrl-U edit, Ctrl-C interrupts. */
  async function hiddenLine(): Promise<string | undefined> {
    input.setRawMode!(true);
    let value: string[] = [];
    try {
      for (;;) {
        while (pending.length > 0) {
          const [char] = Array.from(pending.slice(0, 2));
          pending = pending.slice(char!.length);
          if (char === '\r' || char === '\n') {
            output.write('\n');
            return value.join('');
          }
          if (char === '\u0003') throw new InterruptedError();
          if (char === '\u0004' && value.length === 0) return undefined;
          if (char === '\u007f' || char === '\b') value = value.slice(0, -1);
          else if (char === '\u0015') value = [];
          else if (char === '\u001b') pending = pending.replace(/^(\[[0-9;?]*[ -/]*[@-~]|O.)/, ''); // an arrow key and the like
          else if (char! >= ' ') value.push(char!);
        }
        if (ended) return value.length > 0 ? value.join('') : undefined;
        await more();
      }
    } finally {
      input.setRawMode!(false);
    }
  }

  async function ask(question: string, fallback: string, hidden = false): Promise<string> {
    output.write(fallback === '' ? `${question}: ` : `${question} [${fallback}]: `);
    const answer = hidden && tty ? await hiddenLine() : await line();
    if (answer === undefined) throw new InputEndedError(question);
    return answer.trim() === '' ? fallback : answer.trim();
  }

  const prompt: Prompt = {
    async text(question, fallback, check) {
      for (;;) {
        const answer = await ask(question, fallback);
        const problem = check?.(answer);
        if (problem === undefined) return answer;
        output.write(`  ${problem}; try again.\n`);
      }
    },
    async list(question, fallback, check, required = false) {
      const split = (answer: string): string[] =>
        answer
          .split(',')
          .map((item) => item.trim())
          .filter((item) => item !== '');
      const answer = await prompt.text(question, fallback.join(', '), (text) => {
        if (required && split(text).length === 0) return 'at least one is needed';
        for (const item of split(text)) {
          const problem = check?.(item);
          if (problem !== undefined) return `"${item}": ${problem}`;
        }
        return undefined;
      });
      return split(answer);
    },
    async yes(question, fallback) {
      const answer = await prompt.text(question, fallback ? 'yes' : 'no', (text) => (/^(y|yes|n|no)$/i.test(text) ? undefined : 'answer yes or no'));
      return /^y/i.test(answer);
    },
    secret: (question) => ask(question, '', true),
    close() {
      input.off('data', onData);
      input.off('end', onEnd);
      input.pause();
    },
  };
  return prompt;
}
