/**
 * A small, safe markdown renderer for chat replies: the text is parsed into plain data
 * (markdown-parse.ts) and becomes Preact elements (never HTML strings), so nothing the model
 * writes can run as markup: raw HTML is text, and only http/https/mailto links are links.
 */
import type { ComponentChildren } from 'preact';
import { parseBlocks, type Block, type Inline } from './markdown-parse.ts';

function renderInline(nodes: readonly Inline[]): ComponentChildren[] {
  return nodes.map((node) => {
    switch (node.kind) {
      case 'text':
        return node.text;
      case 'code':
        return <code>{node.text}</code>;
      case 'strong':
        return <strong>{renderInline(node.children)}</strong>;
      case 'em':
        return <em>{node.text}</em>;
      case 'link':
        return (
          <a href={node.href} target="_blank" rel="noopener noreferrer">
            {node.text}
          </a>
        );
    }
  });
}

function renderBlock(block: Block): ComponentChildren {
  switch (block.kind) {
    case 'code':
      return (
        <pre>
          <code>{block.text}</code>
        </pre>
      );
    case 'heading':
      return <p class="md-h">{renderInline(block.children)}</p>;
    case 'list': {
      const items = block.items.map((item) => <li>{renderInline(item)}</li>);
      return block.ordered ? <ol>{items}</ol> : <ul>{items}</ul>;
    }
    case 'paragraph':
      return <p>{block.lines.flatMap((line, n) => (n === 0 ? renderInline(line) : [<br />, ...renderInline(line)]))}</p>;
  }
}

export function Markdown({ text }: { text: string }) {
  return <div class="md">{parseBlocks(text).map(renderBlock)}</div>;
}
