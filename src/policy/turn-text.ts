/**
 * The user turn as the model sees it. In a DM it is the message itself; in a group it names
 * the speaker, and is preceded by what others said since the bot last answered there (kept as
 * context, never answered on its own). Attachments are described with their workspace paths.
 */
import type { InboundMessage } from '../channel.ts';
import { describeAttachments } from '../inbound/attachments.ts';

const speaker = (message: InboundMessage): string => message.sender.name ?? message.sender.id;

export function turnText(message: InboundMessage, context: readonly InboundMessage[] = []): string {
  const direct = message.direct ?? true;
  const own = [message.text, ...(message.attachments && message.attachments.length > 0 ? [describeAttachments(message.attachments)] : [])].filter((part) => part !== '').join('\n\n');
  if (direct) return own;
  const said = `${speaker(message)}: ${own}`;
  if (context.length === 0) return said;
  const earlier = context.map((m) => `${speaker(m)}: ${m.text}${m.attachments?.length ? ` [${m.attachments.map((a) => a.name).join(', ')}]` : ''}`);
  return `[Earlier in this chat, not addressed to you]\n${earlier.join('\n')}\n\n[Now, to you]\n${said}`;
}
