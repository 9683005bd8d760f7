/**
 * The Memory contract: long-term memories, always scoped to whom they belong, so one
 * person's memories can never be recalled into another person's conversation.
 *
 * - `person`: the sender across all their conversations on one channel (owner `channel:senderId`);
 * - `conversation`: one conversation (owner = its conversation key);
 * - `shared`: everyone (owner '').
 *
 * Recall only ever returns the caller's person memories, the current conversation's and the
 * shared ones.
 */

export type MemoryScope = 'person' | 'conversation' | 'shared';

/** `core`: lasting facts and preferences (snapshotted); `conversation`: auto-saved messages (expire); or any label. */
export type MemoryCategory = 'core' | 'daily' | 'conversation' | (string & {});

/** Who is asking: recall and the tools only ever see these owners' memories (plus shared). */
export interface MemoryWho {
  /** Person owner, `channel:senderId`. */
  readonly person: string;
  /** Conversation key. */
  readonly conversation: string;
}

export interface MemoryEntry {
  readonly id: string;
  /** Unique within its scope and owner; storing the same key again replaces the content. */
  readonly key: string;
  readonly content: string;
  readonly category: MemoryCategory;
  readonly scope: MemoryScope;
  /** `channel:senderId`, a conversation key, or '' for shared. */
  readonly owner: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  /** Relevance in [0, 1]; only set by recall. */
  readonly score?: number;
}

export interface StoreInput {
  readonly content: string;
  /** Default: derived from the content. */
  readonly key?: string;
  /** @default 'core' */
  readonly category?: MemoryCategory;
  readonly scope: MemoryScope;
}

export interface RecallOptions {
  /** @default 5 */
  readonly limit?: number;
  /** Entries scoring below this are dropped. @default 0 */
  readonly minScore?: number;
}

/** What the operator's CLI may filter on (all memories, not one person's view). */
export interface MemoryFilter {
  readonly scope?: MemoryScope;
  readonly owner?: string;
  readonly category?: MemoryCategory;
  readonly limit?: number;
}

export interface MemoryHealth {
  readonly ok: boolean;
  /** e.g. "keyword-only: embedding service unreachable", "re-embedding 1200 memories". */
  readonly detail: string;
}

export interface Memory {
  /** Backend name for logs and status: "sqlite", "markdown", "none". */
  readonly name: string;
  /** Stores (or, for an existing scope + owner + key, replaces) a memory owned per `scope`. */
  store(input: StoreInput, who: MemoryWho): Promise<MemoryEntry>;
  /** The memories most relevant to `query` among the caller's, the conversation's and shared ones. */
  recall(query: string, who: MemoryWho, options?: RecallOptions): Promise<MemoryEntry[]>;
  /** A memory by key among the caller's, the conversation's and shared ones. */
  get(key: string, who: MemoryWho): Promise<MemoryEntry | undefined>;
  /** Operator view: memories matching `filter`, newest first. */
  list(filter?: MemoryFilter): Promise<MemoryEntry[]>;
  /** Forgets a memory by key among the caller's (`who`), or by id/key anywhere (`'operator'`). */
  forget(keyOrId: string, who: MemoryWho | 'operator'): Promise<boolean>;
  count(filter?: MemoryFilter): Promise<number>;
  health(): Promise<MemoryHealth>;
  /** Removes expired conversation memories and writes the core snapshot. */
  hygiene?(): Promise<void>;
  close?(): Promise<void>;
}

/** Turns texts into vectors (an OpenAI-compatible `/v1/embeddings` endpoint, usually). */
export interface EmbeddingProvider {
  /** e.g. "openai:text-embedding-3-small" — part of the cache key, so a new model never reuses old vectors. */
  readonly name: string;
  /** One vector per text, in order. Rejects when the service fails. */
  embed(texts: readonly string[], signal?: AbortSignal): Promise<Float32Array[]>;
}

/** The owner string for a scope. */
export function ownerOf(scope: MemoryScope, who: MemoryWho): string {
  return scope === 'person' ? who.person : scope === 'conversation' ? who.conversation : '';
}

/** Whose memories a turn or tool call may see: the sender on this channel, and this conversation. */
export function whoOf(ctx: { readonly channel: string; readonly senderId: string; readonly conversation: string }): MemoryWho {
  return { person: `${ctx.channel}:${ctx.senderId}`, conversation: ctx.conversation };
}

/** A memory shortened for the model: at most `max` characters, an ellipsis when cut. */
export function clipMemory(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
