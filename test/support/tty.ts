/**
 * Runs a command in a real terminal — a pane of a private tmux server — for what only a TTY
 * shows: the prompt, raw-mode Ctrl-C, Ctrl-D, logs beside the conversation. Every tmux call
 * and every wait has a time limit, and `close` kills the server, so a test never hangs.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireServers } from './servers.ts';

export interface Tty {
  /** Types `text` literally, then Enter. */
  type(text: string): Promise<void>;
  /** Sends tmux key names: `C-c`, `C-d`, `Enter`. */
  keys(...keys: string[]): Promise<void>;
  /**
   * Pastes `text` as a terminal does: line breaks sent as CR, and wrapped in ESC[200~ … ESC[201~
   * when the program turned bracketed paste mode on (tmux paste-buffer -p). No Enter after it.
   */
  paste(text: string): Promise<void>;
  /** Everything the pane has shown, scrollback included, wrapped lines joined. */
  screen(): Promise<string>;
  /** Resolves with the screen once `pattern` matches it; rejects with the screen after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the command's exit status once it has exited. */
  exited(timeoutMs?: number): Promise<number>;
  close(): Promise<void>;
}

export interface TtyOptions {
  readonly cwd: string;
  readonly env?: NodeJS.ProcessEnv;
  readonly width?: number;
  readonly height?: number;
}

const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;

/** Starts `command` (argv) in a fresh tmux server of its own. Fails at once, naming the install line, without tmux. */
export async function startTty(command: readonly string[], options: TtyOptions): Promise<Tty> {
  requireServers('tmux');
  const dir = mkdtempSync(join(tmpdir(), 'sb-tty-'));
  const socket = join(dir, 'tmux.sock');
  const conf = join(dir, 'tmux.conf');
  // The pane stays after the command exits, so what it showed last can still be read.
  writeFileSync(conf, 'set -g remain-on-exit on\nset -g history-limit 10000\n');
  const env: NodeJS.ProcessEnv = { ...process.env, ...options.env, TERM: 'xterm-256color' };
  delete env.TMUX; // tmux refuses to start inside another tmux otherwise
  const tmux = (...args: string[]): Promise<string> =>
    new Promise((resolve, reject) => {
      execFile('tmux', ['-S', socket, '-f', conf, ...args], { env, timeout: 5000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`tmux ${args[0]} failed: ${stderr || error.message}`)) : resolve(stdout),
      );
    });
  const target = 'sb';
  // tmux does not always record a dead pane's exit status, so a small wrapper writes it to a
  // file. The wrapper outlives a Ctrl-C (a handler, not SIG_IGN, so the command keeps the
  // default disposition) and does not touch the terminal: the command inherits it.
  const statusFile = join(dir, 'status');
  const wrapper =
    "const [file, cmd, ...args] = process.argv.slice(1); process.on('SIGINT', () => {});" +
    "require('node:child_process').spawn(cmd, args, { stdio: 'inherit' }).on('exit', (code, signal) => {" +
    "require('node:fs').writeFileSync(file, signal ? signal : String(code)); process.exit(code ?? 1); });";
  const argv = [process.execPath, '-e', wrapper, statusFile, ...command];
  await tmux('new-session', '-d', '-s', target, '-x', String(options.width ?? 160), '-y', String(options.height ?? 50), '-c', options.cwd, argv.map(quote).join(' '));

  const screen = (): Promise<string> => tmux('capture-pane', '-p', '-J', '-S', '-', '-t', target);
  const poll = async <T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; the terminal shows:\n${await screen().catch((error: unknown) => String(error))}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  return {
    type: async (text) => {
      await tmux('send-keys', '-t', target, '-l', text);
      await tmux('send-keys', '-t', target, 'Enter');
    },
    keys: async (...keys) => void (await tmux('send-keys', '-t', target, ...keys)),
    paste: async (text) => {
      await tmux('set-buffer', '-b', 'paste', '--', text);
      await tmux('paste-buffer', '-p', '-d', '-b', 'paste', '-t', target);
    },
    screen,
    waitFor: (pattern, timeoutMs = 15_000) =>
      poll(
        String(pattern),
        async () => {
          const shown = await screen();
          return pattern.test(shown) ? shown : undefined;
        },
        timeoutMs,
      ),
    exited: (timeoutMs = 15_000) =>
      poll(
        'the command to exit',
        async () => {
          if (!existsSync(statusFile)) return undefined;
          const status = readFileSync(statusFile, 'utf8');
          if (!/^\d+$/.test(status)) throw new Error(`the command was killed by ${status}; the terminal shows:\n${await screen()}`);
          return Number(status);
        },
        timeoutMs,
      ),
    close: async () => {
      await tmux('kill-server').catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
