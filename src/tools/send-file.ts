/**
 * `send_file`: sends a file from the workspace to the person, after the reply. The path goes
 * through `resolveInWorkspace` like every file tool; the file is checked to exist, be a
 * regular file and not exceed the limit before the call is accepted.
 */
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { resolveInWorkspace } from '../security/paths.ts';
import type { SecurityPolicy } from '../security/policy.ts';
import { ok, toolError, type Tool } from '../tool.ts';

/** Largest file sent (most chat platforms cap uploads around here). */
export const MAX_SEND_BYTES = 25 * 1024 * 1024;

export interface SendFileArgs {
  readonly path: string;
  /** Name shown to the person. @default the file's own name */
  readonly name?: string;
}

export interface SendFileOptions {
  /** The largest file a channel instance accepts (its FileSender's `maxFileBytes`), when it has a limit of its own. */
  readonly maxFileBytes?: (channel: string) => number | undefined;
}

export function createSendFileTool(policy: SecurityPolicy, options: SendFileOptions = {}): Tool<SendFileArgs> {
  return {
    name: 'send_file',
    description: 'Sends a file from the workspace to the person you are talking to (it arrives after your reply). Use it when they ask for a file or a file is the best answer.',
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path relative to the workspace, e.g. "reports/summary.pdf"' },
        name: { type: 'string', description: 'File name to show; default the file’s own name' },
      },
      required: ['path'],
      additionalProperties: false,
    },
    assess: (args) => ({ risk: 'low', mutates: false, summary: `send_file: ${String(args.path)}` }),
    async execute(args, ctx) {
      if (!ctx.sendFile) return toolError('Files cannot be sent from here (no conversation to send them to).');
      const target = await resolveInWorkspace(policy.workspace, String(args.path));
      if (!target.ok) return toolError(`Cannot send ${JSON.stringify(args.path)}: ${target.error}`);
      let info;
      try {
        info = await stat(target.path);
      } catch {
        return toolError(`There is no file ${JSON.stringify(args.path)} in the workspace.`);
      }
      if (!info.isFile()) return toolError(`${JSON.stringify(args.path)} is not a regular file.`);
      if (info.size > MAX_SEND_BYTES) return toolError(`${JSON.stringify(args.path)} is ${mb(info.size)} MB; files over ${mb(MAX_SEND_BYTES)} MB cannot be sent.`);
      const channelLimit = options.maxFileBytes?.(ctx.channel);
      if (channelLimit !== undefined && info.size > channelLimit) {
        return toolError(
          `${JSON.stringify(args.path)} is ${mb(info.size)} MB; ${ctx.channel} accepts files up to ${mb(channelLimit)} MB, so it cannot be sent here. ` +
            'Tell the person, or send a smaller file (compressed, split, or an excerpt).',
        );
      }
      // eslint-disable-next-line no-control-regex -- control characters are exactly what is removed
      const name = (args.name ?? basename(target.path)).replace(/[\\/\u0000-\u001f]/g, '_').slice(0, 120) || basename(target.path);
      ctx.sendFile({ path: target.path, name });
      return ok(`${name} (${info.size} bytes) will be sent after your reply.`);
    },
  };
}

/** Bytes as MB with one decimal, trailing ".0" dropped (10485760 → "10"). */
const mb = (bytes: number): string => (bytes / 1048576).toFixed(1).replace(/\.0$/, '');
