/**
 * "Save the files, then push": the step every channel takes between reading a message and
 * pushing it. The files go to the attachment store under the message's channel and id; the
 * message carries them only when there are any (a message without files stays as it was read).
 */
import type { Attachment, AttachmentInput, AttachmentStore, InboundMessage } from '../channel.ts';

/** One file as the platform describes it; the channel and message id come from the message. */
export type FileInput = Omit<AttachmentInput, 'channel' | 'messageId'>;

export interface WithAttachmentsOptions {
  /**
   * One download after another (a platform that describes each file through a rate-limited
   * lookup, or whose CDN is asked one file at a time) rather than all at once. @default false
   */
  readonly oneByOne?: boolean;
}

/** Saves `files` (described by `input`) and returns the message with them as its attachments. */
export async function withAttachments<F>(
  store: AttachmentStore,
  message: InboundMessage,
  files: readonly F[],
  input: (file: F, index: number) => FileInput | Promise<FileInput>,
  options: WithAttachmentsOptions = {},
): Promise<InboundMessage> {
  const save = async (file: F, index: number): Promise<Attachment> => store.save({ channel: message.channel, messageId: message.id, ...(await input(file, index)) });
  let attachments: Attachment[];
  if (options.oneByOne) {
    attachments = [];
    for (const [index, file] of files.entries()) attachments.push(await save(file, index));
  } else {
    attachments = await Promise.all(files.map(save));
  }
  return attachments.length > 0 ? { ...message, attachments } : message;
}
