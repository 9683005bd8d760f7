/**
 * The main agent: one turn per inbound message, through the agent loop, with approvals
 * asked in the conversation. This is the runtime's only view of the agent (a TurnHandler).
 */
import type { Logger } from 'pino';
import type { InboundMessage, OutboundFile } from '../channel.ts';
import type { ChatMessage, Provider } from '../provider.ts';
import type { ToolContext } from '../tool.ts';
import { ApprovalStore, approvalQuestion, parseAnswer, type PendingApproval } from './approvals.ts';
import { resultMessages, runLoop, runPrepared, type LoopOutcome, type ToolCallingMode } from './loop.ts';
import { buildSystemPrompt } from './prompt.ts';
import { sanitizeReply } from './sanitize.ts';
import type { ToolRunner } from './tool-runner.ts';
import type { TurnMemory } from './memory-context.ts';
import { whoOf } from '../memory.ts';
import { audioAttachments, imageParts } from '../inbound/attachments.ts';
import type { Transcriber } from '../media/transcribe.ts';
import type { Sql } from '../store/sql.ts';

export interface TurnInput {
  readonly message: InboundMessage;
  readonly conversation: string;
  /** Inbox seq of the message: stable across re-runs of the same message after a crash. */
  readonly turnId: number;
  /** Earlier turns of this conversation, oldest first. */
  readonly history: readonly ChatMessage[];
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** The user turn as the model sees it (a group's speaker and context, attachments). @default message.text */
  readonly prompt?: string;
  /** This conversation's model, when `/model` switched it. */
  readonly model?: string;
  /** Receives the reply's text as the model streams it (for a growing draft message). */
  readonly onTextDelta?: (delta: string) => void;
}

export interface TurnOutput {
  /** Text for the user (already free of internal markup). Empty means: send nothing. */
  readonly reply: string;
  /** This turn's messages (the user's first) to append to the history. */
  readonly messages: readonly ChatMessage[];
  /** Writes that must commit atomically with the turn: run inside its transaction, on `tx`. */
  readonly commit?: (tx: Sql) => Promise<void>;
  /** Workspace files to send after the reply (the send_file tool). */
  readonly files?: readonly OutboundFile[];
}

/** Answers one inbound message. The runtime's only view of the agent. */
export type TurnHandler = (input: TurnInput) => Promise<TurnOutput>;

export interface AgentOptions {
  readonly provider: Provider;
  readonly runner: ToolRunner;
  readonly approvals: ApprovalStore;
  readonly name: string;
  readonly instructions: string;
  /** Absolute path of the tools' workspace. */
  readonly workspace: string;
  /** @default 10 */
  readonly maxToolIterations: number;
  /** @default 'auto' */
  readonly toolCalling: ToolCallingMode;
  /** Extra lines for the system prompt (e.g. the sub-agents that can be delegated to). */
  readonly promptExtras?: readonly string[];
  /** Long-term memory around each turn; omitted = none. */
  readonly memory?: TurnMemory;
  /** Voice notes and audio files to text (`[transcription]`); omitted = they are described only. */
  readonly transcription?: TurnTranscription;
}

export interface TurnTranscription {
  /** The client, made (and its module loaded) on the first voice note. */
  readonly transcriber: () => Promise<Transcriber>;
  /** Send the transcript to the person before the answer. */
  readonly echo: boolean;
}

/** Builds the turn handler for the runtime. */
export function createAgent(options: AgentOptions): TurnHandler {
  // Set once an `auto` endpoint rejects native tools: from then on XML, for every turn.
  let xmlFallback = options.toolCalling === 'xml';

  return async ({ message, conversation, turnId, history, signal, log, prompt, model, onTextDelta }) => {
    const files: OutboundFile[] = [];
    const ctx: ToolContext = {
      conversation,
      channel: message.channel,
      senderId: message.sender.id,
      workspace: options.workspace,
      signal,
      log,
      sendFile: (file) => void files.push(file),
    };
    const who = whoOf(ctx);
    const ownImages = new Set(imageParts(message.attachments).flatMap((part) => (part.type === 'file' ? [part.path] : [])));
    const imageProblems = new Map<string, string>();
    const onImageProblem = (path: string, line: string): void => void (ownImages.has(path) && imageProblems.set(path, line));
    // Voice notes become the person's words, in this turn's user message: history keeps the
    // transcript, so later turns read it and nothing is transcribed twice (a re-run after a crash
    // may). A spoken "yes" answers a pending approval like a typed one; memory recalls for, and
    // saves, what was said (under the same per-person scope as text).
    const heard = await transcribeWith(options.transcription, message, signal, log);
    /** Transcripts the person hears before the answer (`echo_transcript`). */
    const echoed = heard.echo;
    const said = [message.text, ...heard.texts].filter((part) => part !== '').join('\n');
    const spoken = heard.texts.length > 0 ? { ...message, text: said } : message;
    // Both reads at once: on PostgreSQL the two round trips overlap (context() never rejects).
    const [remembered, pending] = await Promise.all([options.memory?.context(spoken, who, log), options.approvals.pending(conversation)]);
    const system = [buildSystemPrompt(options, message), ...(options.promptExtras ?? []), ...(remembered ? ['', remembered] : [])].join('\n');
    const loop = (turn: readonly ChatMessage[], iteration: number, xml: boolean): Promise<LoopOutcome> =>
      runLoop({
        provider: options.provider,
        runner: options.runner,
        system,
        history,
        turn,
        ctx,
        maxIterations: options.maxToolIterations,
        iteration,
        xml,
        onAsk: 'pause',
        ...(model === undefined ? {} : { model }),
        ...(onTextDelta === undefined ? {} : { onTextDelta }),
        ...(ownImages.size > 0 ? { onImageProblem } : {}),
        ...(options.toolCalling === 'auto' ? { onXmlFallback: () => (xmlFallback = true) } : {}),
      });

    const clearPending = (tx: Sql): Promise<void> => options.approvals.in(tx).clear(conversation);
    if (pending && pending.originTurn !== turnId && pending.senderId === message.sender.id) {
      const answer = parseAnswer(said);
      const summaries = pending.paused.calls.flatMap((call) => (call.outcome === 'ask' ? [call.summary] : []));
      log.info({ answer: answer ?? 'other', summaries }, 'approval answered');
      const asked = answer === 'yes' || answer === 'always' ? ('run' as const) : { declined: declinedText(answer, said) };
      const results = await runPrepared(pending.paused.calls, options.runner, ctx, asked);
      const calls = pending.paused.calls.map((call) => call.call);
      const turn = [...pending.paused.turn, ...resultMessages(calls, results, pending.paused.xml)];
      const outcome = await loop(turn, pending.paused.iteration + 1, pending.paused.xml);
      return finish(outcome, async (tx) => {
        await clearPending(tx);
        if (answer === 'always') await options.approvals.in(tx).addAlways(message.channel, message.sender.id, summaries);
      });
    }
    // A pending question from this very message means it is being re-run after a crash: start afresh.
    const stale = pending !== undefined && pending.originTurn === turnId;
    // Photos go with the turn as workspace references (history keeps the paths, never bytes).
    const images = imageParts(message.attachments);
    const content = [prompt ?? message.text, ...heard.lines].filter((part) => part !== '').join('\n\n');
    const outcome = await loop([{ role: 'user', content, ...(images.length > 0 ? { images } : {}) }], 0, xmlFallback);
    await options.memory?.save(spoken, who, log);
    return finish(outcome, stale ? clearPending : undefined);

    function finish(outcome: LoopOutcome, before?: (tx: Sql) => Promise<void>): TurnOutput {
      const sent = files.length > 0 ? { files } : {};
      // The person hears, before the answer, which of this message's photos the model could not see.
      const told = [...echoed, ...[...ownImages].flatMap((path) => imageProblems.get(path) ?? [])];
      const withNotes = (reply: string): string => (told.length === 0 ? reply : [...told, reply].filter((part) => part !== '').join('\n\n'));
      if (outcome.kind === 'done') return { reply: withNotes(sanitizeReply(outcome.reply)), messages: outcome.turn, ...sent, ...(before ? { commit: before } : {}) };
      const next: PendingApproval = {
        conversation,
        originTurn: turnId,
        channel: message.channel,
        senderId: message.sender.id,
        paused: { turn: outcome.turn, calls: outcome.calls, iteration: outcome.iteration, xml: outcome.xml },
      };
      const questions = outcome.calls.flatMap((call) => (call.outcome === 'ask' ? [call.summary] : []));
      log.info({ summaries: questions }, 'asking for approval');
      return {
        reply: approvalQuestion(questions),
        messages: [],
        ...sent,
        commit: async (tx) => {
          await before?.(tx);
          await options.approvals.in(tx).save(next);
        },
      };
    }
  };
}

/** Lines for the model (one per audio attachment) and, with `echo`, for the person. */
async function transcribeWith(
  transcription: TurnTranscription | undefined,
  message: TurnInput['message'],
  signal: AbortSignal,
  log: TurnInput['log'],
): Promise<{ lines: string[]; echo: string[]; texts: string[] }> {
  const audio = audioAttachments(message.attachments);
  if (!transcription || audio.length === 0) return { lines: [], echo: [], texts: [] };
  const transcriber = await transcription.transcriber();
  const lines: string[] = [];
  const echo: string[] = [];
  const texts: string[] = [];
  for (const attachment of audio) {
    const what = attachment.kind === 'voice' ? 'voice note' : 'audio';
    const started = performance.now();
    const result = await transcriber.transcribe(attachment.path!, signal);
    log.info({ file: attachment.path, ok: result.ok, ms: Math.round(performance.now() - started), ...(result.ok ? { chars: result.text.length } : { reason: result.reason }) }, 'transcription');
    if (result.ok) {
      lines.push(`[${what} ${attachment.name}, transcribed — the person's words] ${result.text}`);
      texts.push(result.text);
      if (transcription.echo) echo.push(`🎤 “${result.text}”`);
    } else {
      lines.push(`[${what} ${attachment.name} could not be transcribed: ${result.reason}. Tell the person you could not listen to it, and ask them to type the message or send it again.]`);
    }
  }
  return { lines, echo, texts };
}

function declinedText(answer: 'no' | undefined, text: string): string {
  if (answer === 'no') return 'The person declined this call. Do not retry it; ask them how to proceed if needed.';
  return `The person did not approve this call; instead of yes/no they wrote: "${text.slice(0, 500)}". Treat it as declined and respond to what they wrote.`;
}
