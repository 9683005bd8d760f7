/**
 * The cluster's nodes as each reports itself every few seconds (in PostgreSQL, table
 * `cluster_nodes`): which channels it holds, its turns in flight and done. A node not heard from
 * for three reports is shown as gone.
 */
import type { Sql } from '../store/sql.ts';

/** How often a node reports itself (a node not heard from for three reports is gone). */
export const NODE_REPORT_MS = 3000;

export interface NodeReport {
  readonly node: string;
  readonly version: string;
  readonly startedAt: number;
  readonly channels: readonly string[];
  readonly inFlight: number;
  /** Turns this node ran since it started. */
  readonly turns: number;
}

export interface ClusterNode extends NodeReport {
  readonly seenAt: number;
  readonly alive: boolean;
}

export class NodeRegistry {
  readonly #sql: Sql;
  readonly #intervalMs: number;

  constructor(sql: Sql, intervalMs: number) {
    this.#sql = sql;
    this.#intervalMs = intervalMs;
  }

  get intervalMs(): number {
    return this.#intervalMs;
  }

  async report(report: NodeReport, now = Date.now()): Promise<void> {
    await this.#sql.run(
      `INSERT INTO cluster_nodes (node, version, started_at, seen_at, channels, in_flight, turns) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (node) DO UPDATE SET version = excluded.version, started_at = excluded.started_at, seen_at = excluded.seen_at,
         channels = excluded.channels, in_flight = excluded.in_flight, turns = excluded.turns`,
      [report.node, report.version, report.startedAt, now, JSON.stringify(report.channels), report.inFlight, report.turns],
    );
  }

  /** Says a node stopped (graceful shutdown): it holds nothing any more. */
  async leave(node: string): Promise<void> {
    // seen long enough ago to count as gone at once, and about when it left
    await this.#sql.run("UPDATE cluster_nodes SET seen_at = ?, channels = '[]', in_flight = 0 WHERE node = ?", [Date.now() - 3 * this.#intervalMs - 1, node]);
  }

  async list(now = Date.now()): Promise<ClusterNode[]> {
    const rows = await this.#sql.all<{ node: string; version: string; started_at: number; seen_at: number; channels: string; in_flight: number; turns: number }>(
      'SELECT node, version, started_at, seen_at, channels, in_flight, turns FROM cluster_nodes ORDER BY node',
    );
    return rows.map((row) => {
      const alive = now - row.seen_at <= 3 * this.#intervalMs;
      return {
        node: row.node,
        version: row.version,
        startedAt: row.started_at,
        seenAt: row.seen_at,
        alive,
        channels: alive ? (JSON.parse(row.channels) as string[]) : [],
        inFlight: alive ? row.in_flight : 0,
        turns: row.turns,
      };
    });
  }
}
