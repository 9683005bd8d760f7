/**
 * Channels of earlier versions kept their state in files of their own in
 * `<data_dir>/channels/<name>/` (ChannelContext.stateDir). At a channel's first start with the
 * channel state store, its file is read into the store once and renamed to `<file>.imported`
 * (kept for an operator who wants to look; never read again).
 *
 * In a cluster only the node that ran the channel before has the file, and another node may
 * already have written newer state: then the file is renamed without importing it.
 */
import { readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';

export interface StateFileImport {
  /** The channel's state dir; '' or undefined: there is nothing to import. */
  readonly dir: string | undefined;
  /** The file's name in it, e.g. "sync.json". */
  readonly file: string;
  readonly log: Logger;
  /** Whether the store already has this state (then the file is older than it). */
  stored(): Promise<boolean>;
  /** Writes the file's content into the store; returns how many entries it took. */
  load(text: string): Promise<number>;
}

/** Imports the file when there is one (see above); resolves to whether it did. Rejects when the store cannot be written. */
export async function importStateFile(options: StateFileImport): Promise<boolean> {
  if (!options.dir) return false;
  const path = join(options.dir, options.file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  const superseded = await options.stored();
  const entries = superseded ? 0 : await options.load(text);
  try {
    await rename(path, `${path}.imported`);
  } catch (error) {
    // Imported all the same; the next start finds the store filled and only tries the rename again.
    options.log.warn({ err: error, file: path }, 'channel state imported into the database, but the old file could not be renamed');
  }
  if (superseded) options.log.info({ file: path, renamed: `${options.file}.imported` }, 'old channel state file not imported: the database already holds newer state of this channel');
  else options.log.info({ file: path, entries, renamed: `${options.file}.imported` }, 'channel state imported from its old file into the database');
  return !superseded;
}
