/** Builds the system prompt: who the agent is, the operator's instructions, where it is talking. */
import type { InboundMessage } from '../channel.ts';

export interface PromptOptions {
  readonly name: string;
  readonly instructions: string;
}

export function buildSystemPrompt(options: PromptOptions, message: InboundMessage, now = new Date()): string {
  const parts = [
    `You are ${options.name}, an assistant people reach through chat platforms.`,
    `You are talking on the "${message.channel}" channel with ${message.sender.name ?? message.sender.id}.`,
    `The current time is ${now.toISOString()}.`,
    'Answer in plain, concise text. Use tools when they help; never show tool-call markup to the user.',
  ];
  if (options.instructions.trim() !== '') parts.push('', options.instructions.trim());
  return parts.join('\n');
}
