/**
 * The web console's markdown (console/src/markdown-parse.ts, rendered by markdown.tsx) on any
 * text: it always finishes, and what it makes is bounded by what it was given (no more nodes
 * than a couple per character, no more text than the input). A line opening with three
 * backticks that was not a fence it knew (```c++, four backticks, ```js title="x") once made
 * it push empty paragraphs forever, so the parse runs in a worker with a deadline: a loop that
 * never ends fails the case instead of hanging the suite. Also kept: `javascript:` and `data:`
 * links and raw HTML come out as text, never as links or markup.
 */
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { parseBlocks, parseInline, type Block, type Inline } from '../../console/src/markdown-parse.ts';
import { fuzzAsync, markdownText, nastyText } from '../support/fuzz.ts';

/** Nodes and characters of text in a parse, for the size bound. */
function measure(blocks: readonly Block[]): { nodes: number; chars: number } {
  let nodes = 0;
  let chars = 0;
  const inline = (list: readonly Inline[]): void => {
    for (const node of list) {
      nodes++;
      if (node.kind === 'strong') inline(node.children);
      else chars += node.text.length;
    }
  };
  for (const block of blocks) {
    nodes++;
    if (block.kind === 'code') chars += block.text.length;
    else if (block.kind === 'heading') inline(block.children);
    else {
      const parts = block.kind === 'list' ? block.items : block.lines;
      nodes += parts.length;
      for (const part of parts) inline(part);
    }
  }
  return { nodes, chars };
}

/**
 * Parses in a worker (with a small heap) and answers within `deadlineMs`, or rejects: a parse
 * that never ends is a failed case, and the worker is replaced.
 */
function boundedParser(deadlineMs: number): { parse(text: string): Promise<{ nodes: number; chars: number }>; close(): Promise<void> } {
  const source = `
    const { parentPort } = require('node:worker_threads');
    import(${JSON.stringify(new URL('../../console/src/markdown-parse.ts', import.meta.url).href)}).then((m) => {
      parentPort.on('message', (text) => parentPort.postMessage(m.parseBlocks(text)));
      parentPort.postMessage('ready');
    });`;
  let worker: Worker | undefined;
  let ready: Promise<void> | undefined;
  const spawn = (): void => {
    worker = new Worker(source, { eval: true, resourceLimits: { maxOldGenerationSizeMb: 48, maxYoungGenerationSizeMb: 8 } });
    const w = worker;
    ready = new Promise((resolve, reject) => {
      w.once('message', () => resolve());
      w.once('error', reject);
    });
  };
  return {
    async parse(text) {
      if (!worker) spawn();
      await ready;
      const w = worker!;
      try {
        return await new Promise<{ nodes: number; chars: number }>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`the parse did not finish within ${deadlineMs} ms (a loop that makes no progress?)`)), deadlineMs);
          w.once('message', (blocks: Block[]) => (clearTimeout(timer), resolve(measure(blocks))));
          w.once('error', (error) => (clearTimeout(timer), reject(error)));
          w.once('exit', (code) => (clearTimeout(timer), reject(new Error(`the parse worker exited (${code})`))));
          w.postMessage(text);
        });
      } catch (error) {
        worker = undefined;
        await w.terminate();
        throw error;
      }
    },
    async close() {
      await worker?.terminate();
    },
  };
}

/** Lines that open with backticks but are not the plain ``` fence. */
const oddFence = fc.constantFrom('```c++', '````', '`````', '```js title="x"', '``` ', '```\t', '```-', '```a b', '````md', '``````', '```` ```', '```é');

const withOddFences = fc
  .array(fc.oneof({ weight: 2, arbitrary: oddFence }, { weight: 3, arbitrary: nastyText(60) }, { weight: 1, arbitrary: fc.constantFrom('```', '', '- item', '# h') }), { maxLength: 30 })
  .map((lines) => lines.join('\n'));

describe('console markdown (fuzz)', () => {
  const parser = boundedParser(2000);
  after(() => parser.close());

  for (const [label, text] of [
    ['odd fences', withOddFences],
    ['markdown text', markdownText()],
  ] as const) {
    it(`finishes on ${label}, and makes no more than it was given`, async (t) => {
      await fuzzAsync(
        t,
        `console markdown ${label}`,
        text,
        async (input) => {
          const { nodes, chars } = await parser.parse(input);
          assert.ok(chars <= input.length, `${chars} characters of text from ${input.length}`);
          assert.ok(nodes <= 2 * input.length + 2, `${nodes} nodes from ${input.length} characters`);
        },
        { runs: 150 },
      );
    });
  }

  it('reads long runs of link openers in about linear time (no backtracking over the line)', () => {
    // (test/fuzz/slow-inputs.fuzz.test.ts runs every unit at random; these are the ones that were quadratic)
    for (const unit of ['[', '[a ', '[a](x', '](']) {
      const timed = (n: number): number => {
        const text = unit.repeat(Math.ceil(n / unit.length));
        let best = Infinity;
        for (let i = 0; i < 2; i++) {
          const began = performance.now();
          parseBlocks(text);
          best = Math.min(best, performance.now() - began);
        }
        return best;
      };
      const short = timed(10_000);
      const long = timed(40_000);
      assert.ok(long < 300 || long / Math.max(short, 1) < 8, `${JSON.stringify(unit)}: ${Math.round(short)} ms for 10 000 characters, ${Math.round(long)} ms for 40 000`);
    }
  });

  it('each line that opens with three backticks is a fence, closed by as many backticks or more', () => {
    assert.deepEqual(parseBlocks('```c++\nint x;\n```\nafter'), [
      { kind: 'code', text: 'int x;' },
      { kind: 'paragraph', lines: [[{ kind: 'text', text: 'after' }]] },
    ]);
    assert.deepEqual(parseBlocks('````\n```\n````'), [{ kind: 'code', text: '```' }]);
    assert.deepEqual(parseBlocks('```js title="x"'), [{ kind: 'code', text: '' }]);
  });

  it('keeps javascript: and data: links and raw HTML as text', () => {
    for (const href of ['javascript:alert(1)', 'JavaScript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'vbscript:x', '//evil.example']) {
      const nodes = parseInline(`[click](${href})`);
      assert.ok(nodes.every((node) => node.kind === 'text'), `${href}: ${JSON.stringify(nodes)}`);
    }
    assert.deepEqual(parseInline('[ok](https://example.org/)'), [{ kind: 'link', href: 'https://example.org/', text: 'ok' }]);
    const html = '<img src=x onerror="alert(1)"><script>alert(2)</script>';
    assert.deepEqual(parseBlocks(html), [{ kind: 'paragraph', lines: [[{ kind: 'text', text: html }]] }]);
  });
});
