/**
 * The read queries only the console needs (conversation list, history search, transcripts,
 * open approvals, approved senders), over the same Sql as the stores: SQLite on one node,
 * PostgreSQL in a cluster.
 */
import type { InboundMessage } from '../channel.ts';
import { turnText } from '../policy/turn-text.ts';
import type { ChatMessage } from '../provider.ts';
import type { Reply } from '../store/outbox.ts';
import type { Sql } from '../store/sql.ts';

export interface ConversationRow {
  readonly conversation: string;
  readonly channel: string;
  readonly people: readonly string[];
  readonly messages: number;
  readonly lastAt: number;
  readonly lastLine: string;
}

export interface SearchHit {
  readonly conversation: string;
  readonly turn: number;
  readonly at: number;
  readonly role: string;
  readonly snippet: string;
}

export interface TranscriptEntry {
  readonly turn: number;
  readonly at: number;
  readonly message: ChatMessage;
  /** Who sent the turn's message (from the inbox, while it is kept). */
  readonly sender?: string;
}

/** One message of a conversation as its person saw it (the browser chat's history). */
export interface ChatLine {
  readonly role: 'user' | 'assistant';
  readonly text: string;
  readonly at: number;
}

export interface ApprovalRow {
  readonly conversation: string;
  readonly channel: string;
  readonly senderId: string;
  readonly createdAt: number;
  /** The calls waiting: tool, what exactly would run (summary) and the arguments. */
  readonly calls: ReadonlyArray<{ readonly tool: string; readonly summary: string; readonly args: unknown }>;
}

export interface ApprovedSender {
  readonly channel: string;
  readonly senderId: string;
  readonly approvedAt: number;
}

export interface ConsoleQueries {
  /** Conversations by last activity, newest first. */
  conversations(limit: number): Promise<ConversationRow[]>;
  /** Messages whose text contains `text` (case-insensitive), newest first. */
  search(text: string, limit: number): Promise<SearchHit[]>;
  transcript(conversation: string, limit: number): Promise<TranscriptEntry[]>;
  /**
   * The last `limit` messages of a conversation in the order they were said: each message, then
   * its replies. A turn the model answered is read from the history; one it did not — a chat
   * command and its answer, a failed turn and its apology, a message still waiting, a turn
   * `/new` set aside — from the inbox and the outbox, while they keep it (7 days).
   */
  chat(conversation: string, limit: number): Promise<ChatLine[]>;
  pendingApprovals(): Promise<ApprovalRow[]>;
  approvedSenders(): Promise<ApprovedSender[]>;
  /** Takes back a sender's approval; false when they were not approved. */
  revokeSender(channel: string, senderId: string): Promise<boolean>;
  /** Drops a pending pairing code (the sender's next message gets a new one); false when there was none. */
  denyCode(channel: string, code: string): Promise<boolean>;
}

const likePattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

function textOf(message: ChatMessage): string {
  if (message.role === 'assistant' && message.content === '' && message.toolCalls?.length) return `(tools: ${message.toolCalls.map((call) => call.name).join(', ')})`;
  return message.content;
}

/** Over the daemon's own database, SQLite or PostgreSQL (the two JSON and LIKE spellings are the only difference). */
export function createConsoleQueries(sql: Sql): ConsoleQueries {
  const pg = sql.dialect === 'postgres';
  const senderJson = pg ? "payload::json->'sender'->>'id'" : "json_extract(payload, '$.sender.id')";
  const contentLike = pg ? "message::json->>'content' ILIKE ? ESCAPE '\\'" : "json_extract(message, '$.content') LIKE ? ESCAPE '\\'";
  const conversations = (limit: number) =>
    sql.all<{ conversation: string; messages: number; last_at: number }>(
      `SELECT conversation, sum(messages) AS messages, max(last_at) AS last_at FROM (
         SELECT conversation, count(*) AS messages, max(created_at) AS last_at FROM history GROUP BY conversation
         UNION ALL
         SELECT conversation, 0 AS messages, max(received_at) AS last_at FROM inbox GROUP BY conversation
       ) AS activity GROUP BY conversation ORDER BY last_at DESC LIMIT ?`,
      [limit],
    );
  const lastMessage = (conversation: string) => sql.get<{ message: string }>('SELECT message FROM history WHERE conversation = ? ORDER BY id DESC LIMIT 1', [conversation]);
  const lastInbound = (conversation: string) => sql.get<{ payload: string }>('SELECT payload FROM inbox WHERE conversation = ? ORDER BY seq DESC LIMIT 1', [conversation]);
  const people = (conversation: string) => sql.all<{ sender: string | null }>(`SELECT DISTINCT ${senderJson} AS sender FROM inbox WHERE conversation = ? LIMIT 20`, [conversation]);
  const search = (pattern: string, limit: number) =>
    sql.all<{ conversation: string; turn: number; created_at: number; message: string }>(
      `SELECT conversation, turn, created_at, message FROM history WHERE ${contentLike} ORDER BY id DESC LIMIT ?`,
      [pattern, limit],
    );
  const transcript = (conversation: string, limit: number) =>
    sql.all<{ turn: number; created_at: number; message: string; payload: string | null }>(
      `SELECT h.turn, h.created_at, h.message, i.payload FROM (
         SELECT * FROM history WHERE conversation = ? ORDER BY id DESC LIMIT ?
       ) AS h LEFT JOIN inbox i ON i.seq = h.turn ORDER BY h.turn, h.id`,
      [conversation, limit],
    );
  const historyTail = (conversation: string, limit: number) =>
    sql.all<{ turn: number; created_at: number; message: string }>('SELECT turn, created_at, message FROM history WHERE conversation = ? ORDER BY id DESC LIMIT ?', [conversation, limit]);
  const inboxTail = (conversation: string, limit: number) =>
    sql.all<{ seq: number; received_at: number; payload: string }>('SELECT seq, received_at, payload FROM inbox WHERE conversation = ? ORDER BY seq DESC LIMIT ?', [conversation, limit]);
  const repliesSince = (conversation: string, seq: number) =>
    sql.all<{ inbox_seq: number; created_at: number; payload: string }>('SELECT inbox_seq, created_at, payload FROM outbox WHERE conversation = ? AND inbox_seq >= ? ORDER BY id', [conversation, seq]);
  const approvals = () =>
    sql.all<{ conversation: string; channel: string; sender_id: string; state: string; created_at: number }>(
      'SELECT conversation, channel, sender_id, state, created_at FROM approvals_pending ORDER BY created_at',
    );
  const approved = () => sql.all<{ channel: string; sender_id: string; approved_at: number }>('SELECT channel, sender_id, approved_at FROM pairing WHERE approved_at IS NOT NULL ORDER BY channel, approved_at');

  const senderOf = (payload: string | null | undefined): string | undefined => {
    if (!payload) return undefined;
    try {
      const parsed = JSON.parse(payload) as { sender?: { id?: string; name?: string }; text?: string };
      return parsed.sender?.name ?? parsed.sender?.id;
    } catch {
      return undefined;
    }
  };

  return {
    async conversations(limit) {
      const rows = await conversations(limit);
      return Promise.all(rows.map(async (row) => {
        const last = await lastMessage(row.conversation);
        let lastLine = '';
        if (last) lastLine = textOf(JSON.parse(last.message) as ChatMessage);
        else {
          const inbound = await lastInbound(row.conversation);
          if (inbound) lastLine = (JSON.parse(inbound.payload) as { text?: string }).text ?? '';
        }
        return {
          conversation: row.conversation,
          channel: row.conversation.split(':')[0] ?? '',
          people: (await people(row.conversation))
            .map((p) => p.sender)
            .filter((p): p is string => typeof p === 'string'),
          messages: row.messages,
          lastAt: row.last_at,
          lastLine: lastLine.slice(0, 200),
        };
      }));
    },
    async search(text, limit) {
      return (await search(likePattern(text), limit)).map((row) => {
        const message = JSON.parse(row.message) as ChatMessage;
        const content = textOf(message);
        const at = content.toLowerCase().indexOf(text.toLowerCase());
        const start = Math.max(0, at - 60);
        return { conversation: row.conversation, turn: row.turn, at: row.created_at, role: message.role, snippet: `${start > 0 ? '…' : ''}${content.slice(start, start + 200)}` };
      });
    },
    async transcript(conversation, limit) {
      return (await transcript(conversation, limit)).map((row) => {
        const sender = senderOf(row.payload);
        return { turn: row.turn, at: row.created_at, message: JSON.parse(row.message) as ChatMessage, ...(sender === undefined ? {} : { sender }) };
      });
    },
    async chat(conversation, limit) {
      const history = (await historyTail(conversation, limit)).reverse();
      const inbound = (await inboxTail(conversation, limit)).reverse();
      // Where a tail was cut at `limit`, the turns before its first are not known (a history
      // there, or a message): only the turns both tails cover are read from the inbox and outbox.
      const from = Math.max(history.length === limit ? history[0]!.turn : 0, inbound.length === limit ? inbound[0]!.seq : 0);
      const replies = await repliesSince(conversation, from);
      const turns = new Map<number, ChatLine[]>();
      const linesOf = (turn: number): ChatLine[] => {
        let lines = turns.get(turn);
        if (!lines) turns.set(turn, (lines = []));
        return lines;
      };
      for (const row of history) {
        const message = JSON.parse(row.message) as ChatMessage;
        if (message.role === 'user' || (message.role === 'assistant' && message.content !== '')) linesOf(row.turn).push({ role: message.role, text: message.content, at: row.created_at });
      }
      const answered = new Set(turns.keys());
      for (const row of inbound) {
        if (answered.has(row.seq)) continue;
        linesOf(row.seq).push({ role: 'user', text: turnText(JSON.parse(row.payload) as InboundMessage), at: row.received_at });
      }
      for (const row of replies) {
        if (answered.has(row.inbox_seq)) continue;
        const text = (JSON.parse(row.payload) as Reply).text;
        if (text !== '') linesOf(row.inbox_seq).push({ role: 'assistant', text, at: row.created_at });
      }
      return [...turns.entries()]
        .sort(([a], [b]) => a - b)
        .flatMap(([, lines]) => lines)
        .slice(-limit);
    },
    async pendingApprovals() {
      return (await approvals()).map((row) => {
        let calls: ApprovalRow['calls'] = [];
        try {
          const state = JSON.parse(row.state) as { calls?: Array<{ outcome: string; call: { name: string }; summary?: string; args?: unknown }> };
          calls = (state.calls ?? []).filter((call) => call.outcome === 'ask').map((call) => ({ tool: call.call.name, summary: call.summary ?? '', args: call.args ?? {} }));
        } catch {
          // an unreadable state still shows who asked
        }
        return { conversation: row.conversation, channel: row.channel, senderId: row.sender_id, createdAt: row.created_at, calls };
      });
    },
    async approvedSenders() {
      return (await approved()).map((row) => ({ channel: row.channel, senderId: row.sender_id, approvedAt: row.approved_at }));
    },
    async revokeSender(channel, senderId) {
      return (await sql.run('DELETE FROM pairing WHERE channel = ? AND sender_id = ? AND approved_at IS NOT NULL', [channel, senderId])) > 0;
    },
    async denyCode(channel, code) {
      return (await sql.run('DELETE FROM pairing WHERE channel = ? AND code = ? AND approved_at IS NULL', [channel, code.trim().toUpperCase()])) > 0;
    },
  };
}
