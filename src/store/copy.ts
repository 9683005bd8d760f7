/**
 * Copies every durable table from one store to another — SQLite to PostgreSQL (moving to a
 * cluster), PostgreSQL to PostgreSQL, or back to SQLite — through the one `Sql` port both
 * engines implement (src/store/sql.ts). Used by `switchboard store copy` (app/store-cli.ts).
 *
 * * In order: the tables of {@link COPIED_TABLES}, each read in its primary key's order, in
 *   batches, every batch one transaction on the target.
 * * Resumable: rows are inserted with `ON CONFLICT DO NOTHING`, and the target remembers an
 *   unfinished copy (table `switchboard_store_copy`), so a copy interrupted half-way is run again
 *   as it was and completes, without a duplicate and without `force`.
 * * A target that already holds rows (and is not such an unfinished copy) is refused unless
 *   `force`, which deletes what it holds in the copied tables first.
 * * PostgreSQL's sequences are set past the ids copied, so new rows do not collide with them.
 * * Counts are compared table by table at the end.
 *
 * Tables one engine has and the other has not are left out, each for a reason
 * ({@link SKIPPED_TABLES}); a table in neither list makes the copy fail (and the test that
 * enumerates both schemas), so a new table is never silently left behind.
 */
import type { Sql, SqlValue } from './sql.ts';

export interface TablePlan {
  readonly table: string;
  /** Its primary key (the order rows are read in). */
  readonly key: readonly string[];
  /** The PostgreSQL sequence column (bigserial) to set past the copied ids. */
  readonly serial?: string;
}

/** Every table that holds durable state, in the order they are copied. */
export const COPIED_TABLES: readonly TablePlan[] = [
  { table: 'inbox', key: ['seq'], serial: 'seq' },
  { table: 'outbox', key: ['id'], serial: 'id' },
  { table: 'drafts', key: ['inbox_seq'] },
  { table: 'history', key: ['id'], serial: 'id' },
  { table: 'conversation_settings', key: ['conversation'] },
  { table: 'approvals_pending', key: ['conversation'] },
  { table: 'approvals_always', key: ['channel', 'sender_id', 'summary'] },
  { table: 'schedules', key: ['id'], serial: 'id' },
  { table: 'pairing', key: ['channel', 'sender_id'] },
  { table: 'memories', key: ['id'] },
  { table: 'channel_state', key: ['channel', 'key'] },
  // SQLite only (copied between two SQLite files): the embedding model of the vectors and the embeddings cache
  { table: 'memory_meta', key: ['key'] },
  { table: 'embedding_cache', key: ['hash'] },
];

/** Tables (or prefixes, ending in `*`) that are not copied, and why. */
export const SKIPPED_TABLES: Readonly<Record<string, string>> = {
  'memories_fts*': 'SQLite\'s full-text index of memories: the target builds its own as the memories are inserted',
  sqlite_sequence: 'SQLite\'s AUTOINCREMENT counters: SQLite moves them past the ids inserted',
  switchboard_migrations: 'the schema version: the target\'s own migrations made it',
  switchboard_store_copy: 'this copy\'s own progress',
  cluster_nodes: 'each running node\'s own report: the nodes write it again when they start',
  remote_tools: 'the tools of remote-tool clients connected to a running node: they register again',
  remote_tool_calls: 'calls in flight between running nodes',
};

/** Whether `table` is known to be left out. */
export function skipped(table: string): string | undefined {
  for (const [name, why] of Object.entries(SKIPPED_TABLES)) {
    if (name.endsWith('*') ? table.startsWith(name.slice(0, -1)) : table === name) return why;
  }
  return undefined;
}

/** The tables of a store's schema (PostgreSQL: schema public; pg-boss's own schema is its queue). */
export async function listTables(sql: Sql): Promise<string[]> {
  const rows =
    sql.dialect === 'sqlite'
      ? await sql.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      : await sql.all<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name");
  return rows.map((row) => row.name);
}

/** The columns one can insert into (PostgreSQL's generated columns are not). */
export async function listColumns(sql: Sql, table: string): Promise<string[]> {
  if (sql.dialect === 'sqlite') return (await sql.all<{ name: string }>(`SELECT name FROM pragma_table_info('${table}') ORDER BY cid`)).map((row) => row.name);
  return (
    await sql.all<{ name: string }>("SELECT column_name AS name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ? AND is_generated = 'NEVER' ORDER BY ordinal_position", [table])
  ).map((row) => row.name);
}

/** A column only one engine has, and what the copy does about it. */
export const ENGINE_COLUMNS: Readonly<Record<string, string>> = {
  'memories.n': 'PostgreSQL\'s row number for memories (bigserial): given by the target',
  'memories.embedding_bits': 'SQLite\'s sign bits of each vector: computed from the vector when the target is SQLite',
};

export interface TableCount {
  readonly table: string;
  readonly source: number;
  readonly target: number;
}

export interface CopyOptions {
  readonly from: Sql;
  readonly to: Sql;
  /** What to call the source in the target's progress record (the redacted URL or the file). */
  readonly fromName: string;
  /** Delete what the target holds in the copied tables first. */
  readonly force?: boolean;
  /** Rows per batch (one transaction each). @default 500 */
  readonly batchRows?: number;
  /**
   * Runs once every row is in and the counts match, before the copy is marked finished (so a
   * failure here is run again with the copy): the CLI hands a PostgreSQL target's unanswered
   * messages to the cluster's turn queue.
   */
  readonly beforeFinish?: (to: Sql) => Promise<void>;
  /** Told after each batch (progress; a test interrupts the copy here). */
  readonly onBatch?: (table: string, copied: number) => void | Promise<void>;
}

export type CopyResult =
  | { readonly ok: true; readonly resumed: boolean; readonly counts: readonly TableCount[] }
  | { readonly ok: false; readonly reason: 'target not empty'; readonly holding: readonly TableCount[] }
  | { readonly ok: false; readonly reason: 'counts differ'; readonly counts: readonly TableCount[] };

const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** The copy; see the module comment. Throws on an unknown table or a database error (the copy can then be run again). */
export async function copyStore(options: CopyOptions): Promise<CopyResult> {
  const { from, to } = options;
  const batchRows = options.batchRows ?? 500;
  const fromTables = new Set(await listTables(from));
  const toTables = new Set(await listTables(to));
  const known = new Set(COPIED_TABLES.map((plan) => plan.table));
  const unknown = [...fromTables, ...toTables].filter((table) => !known.has(table) && skipped(table) === undefined);
  if (unknown.length > 0) {
    throw new Error(`store copy does not know the table${unknown.length === 1 ? '' : 's'} ${[...new Set(unknown)].join(', ')}: add ${unknown.length === 1 ? 'it' : 'them'} to COPIED_TABLES or SKIPPED_TABLES in src/store/copy.ts`);
  }
  const plans = COPIED_TABLES.filter((plan) => fromTables.has(plan.table) && toTables.has(plan.table));

  await to.run('CREATE TABLE IF NOT EXISTS switchboard_store_copy (source TEXT PRIMARY KEY, started_at BIGINT NOT NULL, finished_at BIGINT)');
  const progress = await to.get<{ finished_at: number | null }>('SELECT finished_at FROM switchboard_store_copy WHERE source = ?', [options.fromName]);
  const resuming = progress !== undefined && progress.finished_at === null;
  const holding: TableCount[] = [];
  for (const plan of plans) {
    const target = await count(to, plan.table);
    if (target > 0) holding.push({ table: plan.table, source: await count(from, plan.table), target });
  }
  if (holding.length > 0 && !resuming && !options.force) return { ok: false, reason: 'target not empty', holding };

  await to.transaction(async (tx) => {
    if (options.force && !resuming) for (const plan of [...plans].reverse()) await tx.run(`DELETE FROM ${ident(plan.table)}`);
    await tx.run('DELETE FROM switchboard_store_copy WHERE source = ?', [options.fromName]);
    await tx.run('INSERT INTO switchboard_store_copy (source, started_at) VALUES (?, ?)', [options.fromName, Date.now()]);
  });

  for (const plan of plans) await copyTable(plan, options, batchRows);
  if (to.dialect === 'postgres') {
    for (const plan of plans) {
      if (plan.serial === undefined) continue;
      // past the largest id copied (or back to 1 for an empty table), so the next insert takes a new one
      await to.run(
        `SELECT setval(pg_get_serial_sequence('${plan.table}', '${plan.serial}'), COALESCE((SELECT max(${ident(plan.serial)}) FROM ${ident(plan.table)}), 1), (SELECT max(${ident(plan.serial)}) FROM ${ident(plan.table)}) IS NOT NULL)`,
      );
    }
  }
  const counts: TableCount[] = [];
  for (const plan of plans) counts.push({ table: plan.table, source: await count(from, plan.table), target: await count(to, plan.table) });
  if (counts.some((entry) => entry.source !== entry.target)) return { ok: false, reason: 'counts differ', counts };
  await options.beforeFinish?.(to);
  await to.run('UPDATE switchboard_store_copy SET finished_at = ? WHERE source = ?', [Date.now(), options.fromName]);
  return { ok: true, resumed: resuming, counts };
}

async function count(sql: Sql, table: string): Promise<number> {
  return Number((await sql.get<{ n: number }>(`SELECT count(*) AS n FROM ${ident(table)}`))?.n ?? 0);
}

async function copyTable(plan: TablePlan, options: CopyOptions, batchRows: number): Promise<void> {
  const { from, to } = options;
  const fromColumns = await listColumns(from, plan.table);
  const toColumns = new Set(await listColumns(to, plan.table));
  const missing = fromColumns.filter((column) => !toColumns.has(column) && ENGINE_COLUMNS[`${plan.table}.${column}`] === undefined);
  if (missing.length > 0) throw new Error(`store copy: ${plan.table}.${missing.join(`, ${plan.table}.`)} has no place in the target (is its schema older?); nothing of ${plan.table} was copied`);
  const columns = fromColumns.filter((column) => toColumns.has(column));
  // SQLite's vector sign bits, computed from the vector (src/vectors.ts) when the source has none.
  const addBits = plan.table === 'memories' && toColumns.has('embedding_bits') && !fromColumns.includes('embedding_bits');
  const { signBits, fromBlob } = addBits ? await import('../vectors.ts') : { signBits: undefined, fromBlob: undefined };
  const insertColumns = addBits ? [...columns, 'embedding_bits'] : columns;
  const keyList = plan.key.map(ident).join(', ');
  let after: SqlValue[] | undefined;
  let copied = 0;
  for (;;) {
    const where = after === undefined ? '' : `WHERE (${keyList}) > (${plan.key.map(() => '?').join(', ')})`;
    const rows = await from.all<Record<string, SqlValue>>(`SELECT ${columns.map(ident).join(', ')} FROM ${ident(plan.table)} ${where} ORDER BY ${keyList} LIMIT ${batchRows}`, after ?? []);
    if (rows.length === 0) return;
    const params: SqlValue[] = [];
    for (const row of rows) {
      for (const column of columns) params.push(row[column] ?? null);
      if (addBits) {
        const embedding = row.embedding;
        params.push(embedding instanceof Uint8Array ? Buffer.from(signBits!(fromBlob!(embedding))) : null);
      }
    }
    const placeholders = rows.map(() => `(${insertColumns.map(() => '?').join(', ')})`).join(', ');
    await to.transaction((tx) => tx.run(`INSERT INTO ${ident(plan.table)} (${insertColumns.map(ident).join(', ')}) VALUES ${placeholders} ON CONFLICT DO NOTHING`, params));
    copied += rows.length;
    const last = rows.at(-1)!;
    after = plan.key.map((column) => last[column] ?? null);
    await options.onBatch?.(plan.table, copied);
    if (rows.length < batchRows) return;
  }
}
