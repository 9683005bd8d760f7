/**
 * The shell tool's checks on real files: wildcards expanded by us (never by a shell), every
 * value a program could take as a path resolved against the workspace (symlinks followed),
 * and the expanded argv judged again by the command policy. The same `prepareCommand` runs
 * once for the whole line before anything starts, and again for each command right before it
 * is spawned, so the argv that runs is the argv that was checked.
 */
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Risk } from '../tool.ts';
import { assessSegment, cdOperands, pathCandidates, riskAbove, type CommandPolicy, type Segment, type Word } from '../security/commands.ts';
import { resolveInside } from '../security/paths.ts';
import type { PreparedCommand } from './pipeline.ts';
import { expandWord } from './shell-glob.ts';

/** What the checks need: the workspace, the policy, and the risk that was approved for the whole line. */
export interface ArgumentContext {
  readonly root: string;
  readonly commands: CommandPolicy;
  readonly approved: { readonly risk: Risk; readonly mutates: boolean };
}

type Prepared = PreparedCommand | { readonly refused: string };

/** Expands `segment`'s wildcards in `cwd` and checks the resulting argv; the argv to spawn, or why not. */
export async function prepareCommand(segment: Segment, cwd: string, context: ArgumentContext): Promise<Prepared> {
  const argv: string[] = [];
  for (const word of segment.words) {
    const values = await expandChecked(word, cwd, context.root);
    if (typeof values === 'string') return { refused: values };
    argv.push(...values);
  }
  const literal = { words: argv.map(literalWord), redirections: segment.redirections };
  const expanded = argv.length !== segment.words.length || segment.words.some((w, i) => w.text !== argv[i]);
  const judged = assessSegment(literal, context.commands);
  const shown = `after wildcard expansion (${argv.join(' ')})`;
  if ('refused' in judged) return { refused: expanded ? `${shown}: ${judged.refused}` : judged.refused };
  if (riskAbove(judged.risk, context.approved.risk) || (judged.mutates && !context.approved.mutates)) {
    return { refused: `${shown} the command is riskier than the one assessed (${judged.risk} risk${judged.mutates ? ', writes files' : ''}); name the files explicitly.` };
  }
  for (const value of argv.slice(1)) {
    for (const candidate of pathCandidates(literalWord(value))) {
      if (candidate === '' || candidate === '/dev/null') continue;
      const problem = await pathProblem(context.root, resolve(cwd, candidate));
      if (problem !== undefined) return { refused: `the argument ${candidate}: ${problem}` };
    }
  }
  return { argv, redirections: segment.redirections };
}

/** A word's values after expansion, every wildcard match checked on the way; or a refusal. */
async function expandChecked(word: Word, cwd: string, root: string): Promise<readonly string[] | string> {
  if (!word.glob) return [word.text];
  const literal = await pathProblem(root, resolve(cwd, word.text));
  if (literal !== undefined) return `the argument ${word.text}: ${literal}`;
  const check = async (path: string, name: string): Promise<string | undefined> => {
    const problem = await pathProblem(root, path);
    return problem === undefined ? undefined : `the argument ${word.text} (matching ${name}): ${problem}`;
  };
  const expansion = await expandWord(word, cwd, check);
  if (!expansion.ok) return expansion.reason;
  const option = expansion.values.find((value) => value.startsWith('-') && value !== word.text);
  if (option !== undefined) {
    return `the wildcard ${word.text} matched the file name ${option}, which the program would take as an option; write ./${word.text} instead.`;
  }
  return expansion.values;
}

/** A value from expansion: quoted, so nothing in it is a wildcard again. */
function literalWord(text: string): Word {
  return { text, quoted: true, glob: false, pattern: text };
}

async function pathProblem(root: string, absolute: string): Promise<string | undefined> {
  const resolved = await resolveInside(root, absolute);
  return resolved.ok ? undefined : resolved.error;
}

/**
 * Checks every command of the line before anything runs: in the workspace and in every
 * directory an earlier `cd` may have moved to. Commands are prepared again right before they
 * run (files may have changed by then); this pass refuses early what can be seen now.
 */
export async function checkLine(segments: readonly Segment[], context: ArgumentContext): Promise<string | undefined> {
  let cwds = new Set([context.root]);
  for (const segment of segments) {
    const [program, ...args] = segment.words;
    if (program?.text === 'cd') {
      const target = args.find((word) => !word.text.startsWith('-'));
      if (target?.glob === true) return `cd needs an exact directory name, not a wildcard (${target.text}).`;
      for (const cwd of target === undefined ? [] : cwds) {
        const problem = await pathProblem(context.root, resolve(cwd, target!.text));
        if (problem !== undefined) return `the argument ${target!.text}: ${problem}`;
      }
      cwds = new Set([...cwds, ...(await cdTargets(cwds, target?.text, context.root))]);
      continue;
    }
    for (const cwd of cwds) {
      const prepared = await prepareCommand(segment, cwd, context);
      if ('refused' in prepared) return prepared.refused;
    }
  }
  return undefined;
}

async function cdTargets(cwds: ReadonlySet<string>, target: string | undefined, root: string): Promise<string[]> {
  const found: string[] = [];
  for (const cwd of cwds) {
    const moved = await changeDirectory(target === undefined ? [] : [target], cwd, root);
    if ('cwd' in moved) found.push(moved.cwd);
  }
  return found;
}

/** The `cd` builtin: only to directories inside the workspace (symlinks resolved); no operand goes to the workspace. */
export async function changeDirectory(args: readonly string[], cwd: string, root: string): Promise<{ cwd: string } | { error: string }> {
  const operands = cdOperands(args) ?? [];
  const target = operands[0];
  if (target === undefined) return { cwd: root };
  const resolved = await resolveInside(root, resolve(cwd, target));
  if (!resolved.ok) return { error: `cd: ${target}: ${resolved.error}` };
  const info = await stat(resolved.path).catch(() => undefined);
  if (info === undefined) return { error: `cd: ${target}: no such directory` };
  if (!info.isDirectory()) return { error: `cd: ${target}: not a directory` };
  return { cwd: resolved.path };
}
