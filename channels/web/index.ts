/**
 * The browser chat of the web console, as a channel like any other: each signed-in operator is
 * a person (`web:console:<name>`), their messages go through the inbox, the policy, the agent
 * and the outbox, and history and memory are kept as on any channel. Replies stream: the
 * channel can edit (a draft that grows as the model writes), and every send, draft, edit and
 * file is an event handed to that operator's open pages (the console's event stream).
 *
 * No dependency and nothing to connect to: loaded at start when the console is on, it costs
 * a few hundred lines of code and one Map.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Channel, ChannelContext, FileSender, MessageEditor, OutboundFile, OutboundMessage, Push } from '../../src/channel.ts';
import { conversationKey, type ConversationRef } from '../../src/conversation.ts';
import type { ChatEvent, ChatPort, ChatUpload } from '../../src/console/deps.ts';
import { readImageHeaderOfFile } from '../../src/media/dimensions.ts';
import { BoundedMap } from '../../src/bounded-map.ts';
import { withAttachments } from '../../src/inbound/with-attachments.ts';

/** The account part of every web conversation key. */
export const webAccount = 'console';
/** Files sent to operators that can still be fetched. */
const maxFiles = 500;

export interface WebChannel extends Channel, MessageEditor, FileSender, ChatPort {}

export interface WebChannelOptions {
  /** How often a streamed reply is updated in the page. @default 100 */
  readonly editIntervalMs?: number;
}

export function createWebChannel(ctx: ChannelContext, options: WebChannelOptions = {}): WebChannel {
  const listeners = new Map<string, Set<(event: ChatEvent) => void>>();
  const files = new BoundedMap<string, { path: string; name: string; operator: string; mime?: string }>(maxFiles);
  let push: Push | undefined;

  const emit = (operator: string, event: ChatEvent): void => {
    for (const listener of listeners.get(operator) ?? []) {
      try {
        listener(event);
      } catch (error) {
        ctx.log.warn({ err: error }, 'a chat listener failed');
      }
    }
  };
  const newId = (): string => randomBytes(9).toString('base64url');

  return {
    name: ctx.name,
    editIntervalMs: options.editIntervalMs ?? 100,

    async listen(givenPush, signal, link) {
      push = givenPush;
      link.ready();
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      push = undefined;
    },

    async send(message: OutboundMessage) {
      emit(message.chat, { type: 'message', id: newId(), text: message.text, at: Date.now() });
    },

    async sendDraft(message: OutboundMessage) {
      const id = newId();
      emit(message.chat, { type: 'draft', id, text: message.text, at: Date.now() });
      return id;
    },

    async edit(ref: ConversationRef, messageId: string, text: string) {
      emit(ref.chat, { type: 'draft', id: messageId, text, at: Date.now() });
    },

    async sendFile(ref: ConversationRef, file: OutboundFile) {
      const id = newId();
      // An image (by its bytes, not its name) is drawn in the page; anything else is a download link.
      const image = await readImageHeaderOfFile(file.path);
      files.set(id, { path: file.path, name: file.name, operator: ref.chat, ...(image ? { mime: image.mime } : {}) });
      emit(ref.chat, { type: 'file', id, name: file.name, url: `/api/console/chat/file?id=${id}`, at: Date.now(), ...(image ? { image: { width: image.width, height: image.height } } : {}) });
    },

    async post(operator: string, text: string, uploads: readonly ChatUpload[], clientId?: string) {
      const current = push;
      if (!current) throw new Error('the web channel is not running');
      // the page's own id, scoped to its operator: a post tried again is the same message (the inbox drops the copy)
      const id = clientId === undefined ? `${Date.now().toString(36)}-${newId()}` : `c-${createHash('sha256').update(`${operator}\u0000${clientId}`).digest('base64url').slice(0, 24)}`;
      const message = { channel: ctx.name, account: webAccount, chat: operator, id, sender: { id: operator, name: operator }, text, timestamp: Date.now(), direct: true };
      await current(
        await withAttachments(ctx.attachments, message, uploads, (upload) => ({
          kind: upload.mime?.startsWith('image/') ? 'photo' : 'file',
          name: upload.name,
          ...(upload.mime ? { mime: upload.mime } : {}),
          size: upload.data.length,
          download: async () => upload.data,
        })),
      );
      return { id };
    },

    subscribe(operator, listener) {
      let set = listeners.get(operator);
      if (!set) listeners.set(operator, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(operator);
      };
    },

    file(operator, id) {
      const file = files.get(id);
      return file && file.operator === operator ? { path: file.path, name: file.name, ...(file.mime ? { mime: file.mime } : {}) } : undefined;
    },

    conversation: (operator) => conversationKey({ channel: ctx.name, account: webAccount, chat: operator }),
  };
}
