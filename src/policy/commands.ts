/**
 * Chat commands, answered by the runtime without the model: `/new` (fresh history for this
 * conversation), `/model [name]` (show or switch this conversation's model among those
 * configured), `/status` (a short health line) and `/help`. A leading `!` works too, for
 * platforms that keep `/…` for their own commands (Slack, IRC).
 */
import type { Sql } from '../store/sql.ts';

export type CommandName = 'new' | 'model' | 'status' | 'help';

export interface Command {
  readonly name: CommandName;
  /** What follows the command, trimmed. */
  readonly argument: string;
}

const names = new Set<CommandName>(['new', 'model', 'status', 'help']);

/** The command in a message, if it is one (`/model gpt-4o`, `!new`). */
export function parseCommand(text: string): Command | undefined {
  const match = /^[/!]([a-z]+)(?:\s+([\s\S]*))?$/i.exec(text.trim());
  if (!match) return undefined;
  const name = match[1]!.toLowerCase() as CommandName;
  return names.has(name) ? { name, argument: (match[2] ?? '').trim() } : undefined;
}

export interface CommandDeps {
  /** Models a conversation may switch to (the first is the default). */
  readonly models: readonly string[];
  /** This conversation's model, when one was chosen. */
  model(conversation: string): Promise<string | undefined>;
  /** Sets the model inside the answer's transaction `tx`. */
  setModel(tx: Sql, conversation: string, model: string | undefined): Promise<void>;
  /** Forgets a conversation's history, inside the answer's transaction `tx`. */
  clearHistory(tx: Sql, conversation: string): Promise<void>;
  /** A one-line health summary. */
  status(): string;
}

export interface CommandResult {
  readonly reply: string;
  /** Writes that commit with the answer (inside the turn transaction). */
  readonly commit?: (tx: Sql) => Promise<void>;
}

export async function runCommand(command: Command, conversation: string, deps: CommandDeps): Promise<CommandResult> {
  switch (command.name) {
    case 'help':
      return {
        reply: [
          'Commands:',
          '/new — start a fresh conversation here (long-term memories stay)',
          '/model — show the model; /model <name> — switch this conversation to another configured model',
          '/status — how I am doing',
          '/help — this list',
        ].join('\n'),
      };
    case 'status':
      return { reply: deps.status() };
    case 'new':
      return { reply: 'Started a fresh conversation: I have set aside what we said here before.', commit: (tx) => deps.clearHistory(tx, conversation) };
    case 'model': {
      const current = (await deps.model(conversation)) ?? deps.models[0] ?? 'the default model';
      if (command.argument === '') {
        const others = deps.models.filter((model) => model !== current);
        return { reply: `Model: ${current}.${others.length > 0 ? ` Also available: ${others.join(', ')}. Switch with /model <name>.` : ''}` };
      }
      const wanted = command.argument;
      if (!deps.models.includes(wanted)) return { reply: `I can't switch to "${wanted}": the configured models are ${deps.models.join(', ')}.` };
      const isDefault = wanted === deps.models[0];
      return { reply: `Switched this conversation to ${wanted}.`, commit: (tx) => deps.setModel(tx, conversation, isDefault ? undefined : wanted) };
    }
  }
}
