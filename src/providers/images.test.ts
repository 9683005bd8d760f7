/**
 * Images on each provider's wire: the exact JSON of a user message with a photo, and a
 * text-only request unchanged (a `file` reference, which only the vision decorator can read,
 * never reaches the wire).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChatRequest, Provider } from '../provider.ts';
import { startFakeAnthropic } from '../../test/fixtures/fake-anthropic.ts';
import { startFakeGemini } from '../../test/fixtures/fake-gemini.ts';
import { startFakeOpenAI } from '../../test/fixtures/fake-openai.ts';
import { createAnthropicProvider } from './anthropic.ts';
import { createGeminiProvider } from './gemini.ts';
import { createOpenAIProvider } from './openai.ts';

const signal = () => new AbortController().signal;
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3]).toString('base64');
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 4, 5, 6]).toString('base64');

const withPhotos: ChatRequest = {
  system: 's',
  tools: [],
  messages: [
    { role: 'user', content: 'what is this plant?', images: [{ type: 'data', mime: 'image/jpeg', base64: JPEG }, { type: 'data', mime: 'image/png', base64: PNG }] },
  ],
};
const photoOnly: ChatRequest = { system: 's', tools: [], messages: [{ role: 'user', content: '', images: [{ type: 'data', mime: 'image/jpeg', base64: JPEG }] }] };
const textOnly: ChatRequest = {
  system: 's',
  tools: [],
  messages: [
    { role: 'user', content: 'hello' },
    { role: 'assistant', content: 'hi' },
    { role: 'user', content: 'again' },
  ],
};
/** The same conversation with a reference the provider cannot read: must be sent exactly as `textOnly`. */
const withReference: ChatRequest = {
  ...textOnly,
  messages: textOnly.messages.map((message, index) => (index === 0 ? { ...message, images: [{ type: 'file' as const, path: 'inbox/t/1/p.jpg', name: 'p.jpg' }] } : message)),
};

async function sameWire(provider: Provider, bodies: () => unknown[]): Promise<void> {
  await provider.chat(textOnly, signal());
  await provider.chat(withReference, signal());
  const [plain, referenced] = bodies().slice(-2);
  assert.equal(JSON.stringify(referenced), JSON.stringify(plain));
}

describe('images on the wire', () => {
  it('openai: image_url parts with data URLs, before the text; text-only content stays a string', async () => {
    const fake = await startFakeOpenAI();
    try {
      const provider = createOpenAIProvider({ baseUrl: fake.baseUrl, model: 'gpt-4o', timeoutMs: 5000 });
      await provider.chat(withPhotos, signal());
      assert.deepEqual(fake.requests[0]!.body.messages, [
        { role: 'system', content: 's' },
        {
          role: 'user',
          content: [
            { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG}` } },
            { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
            { type: 'text', text: 'what is this plant?' },
          ],
        },
      ]);
      await provider.chat(photoOnly, signal());
      assert.deepEqual(fake.requests[1]!.body.messages[1], { role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${JPEG}` } }] });
      await sameWire(provider, () => fake.requests.map((request) => request.body));
      assert.deepEqual(fake.requests.at(-1)!.body.messages[1], { role: 'user', content: 'hello' });
    } finally {
      await fake.close();
    }
  });

  it('anthropic: image blocks with a base64 source, before the text', async () => {
    const fake = await startFakeAnthropic();
    try {
      const provider = createAnthropicProvider({ baseUrl: fake.baseUrl, model: 'claude-test', apiKey: 'k', timeoutMs: 5000 });
      await provider.chat(withPhotos, signal());
      assert.deepEqual(fake.requests[0]!.body.messages, [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: JPEG } },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
            { type: 'text', text: 'what is this plant?' },
          ],
        },
      ]);
      await provider.chat(photoOnly, signal());
      assert.deepEqual(fake.requests[1]!.body.messages, [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: JPEG } }] }]);
      await sameWire(provider, () => fake.requests.map((request) => request.body));
      assert.deepEqual(fake.requests.at(-1)!.body.messages[0], { role: 'user', content: 'hello' });
    } finally {
      await fake.close();
    }
  });

  it('gemini: inline_data parts, before the text', async () => {
    const fake = await startFakeGemini();
    try {
      const provider = createGeminiProvider({ baseUrl: fake.baseUrl, model: 'gemini-2.5-flash', apiKey: 'k', timeoutMs: 5000 });
      await provider.chat(withPhotos, signal());
      assert.deepEqual(fake.requests[0]!.body.contents, [
        {
          role: 'user',
          parts: [{ inline_data: { mime_type: 'image/jpeg', data: JPEG } }, { inline_data: { mime_type: 'image/png', data: PNG } }, { text: 'what is this plant?' }],
        },
      ]);
      await provider.chat(photoOnly, signal());
      assert.deepEqual(fake.requests[1]!.body.contents, [{ role: 'user', parts: [{ inline_data: { mime_type: 'image/jpeg', data: JPEG } }] }]);
      await sameWire(provider, () => fake.requests.map((request) => request.body));
      assert.deepEqual(fake.requests.at(-1)!.body.contents[0], { role: 'user', parts: [{ text: 'hello' }] });
    } finally {
      await fake.close();
    }
  });
});
