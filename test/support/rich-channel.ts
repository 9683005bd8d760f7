/**
 * A channel with every capability (typing, drafts and edits, files) for runtime tests: each
 * call the runtime makes is handed to the test's `call` (which records it, or throws what the
 * platform would), and `inject` pushes a message from alice in chat c1.
 */
import type { Channel, InboundMessage, OutboundFile, OutboundMessage, Push } from '../../src/channel.ts';
import type { ConversationRef } from '../../src/conversation.ts';

export type ChannelCall =
  | { readonly kind: 'send'; readonly message: OutboundMessage }
  | { readonly kind: 'typing'; readonly ref: ConversationRef }
  | { readonly kind: 'draft'; readonly message: OutboundMessage }
  | { readonly kind: 'edit'; readonly ref: ConversationRef; readonly id: string; readonly text: string }
  | { readonly kind: 'file'; readonly ref: ConversationRef; readonly file: OutboundFile };

export interface RichChannelOptions {
  /** @default 1000 */
  readonly limit?: number;
  /** Whether it can send files. @default true */
  readonly files?: boolean;
  readonly call: (call: ChannelCall) => void;
}

export function createRichChannel(options: RichChannelOptions) {
  let push: Push | undefined;
  const channel: Channel & Record<string, unknown> = {
    name: 'chat',
    maxMessageLength: options.limit ?? 1000,
    typingIntervalMs: 1000,
    editIntervalMs: 20,
    async listen(p: Push, signal: AbortSignal, link) {
      push = p;
      link.ready();
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    },
    async send(message: OutboundMessage) {
      options.call({ kind: 'send', message });
    },
    async typing(ref: ConversationRef) {
      options.call({ kind: 'typing', ref });
    },
    async sendDraft(message: OutboundMessage) {
      options.call({ kind: 'draft', message });
      return 'draft-1';
    },
    async edit(ref: ConversationRef, id: string, text: string) {
      options.call({ kind: 'edit', ref, id, text });
    },
    ...(options.files === false
      ? {}
      : {
          async sendFile(ref: ConversationRef, file: OutboundFile) {
            options.call({ kind: 'file', ref, file });
          },
        }),
  };
  const inject = (partial: Partial<InboundMessage> & { id: string; text: string }) =>
    push!({ channel: 'chat', account: 'bot', chat: 'c1', sender: { id: 'alice', name: 'Alice' }, timestamp: Date.now(), ...partial });
  return { channel, inject };
}
