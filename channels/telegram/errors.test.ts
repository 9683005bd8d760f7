import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GrammyError, HttpError } from 'grammy';
import { SendError } from '../../src/channel.ts';
import { describeError, isMarkupError, isNotModified, migratedTo, toSendError } from './errors.ts';

const TOKEN = '123:secret-token';
const apiError = (error_code: number, description: string, parameters: Record<string, number> = {}): GrammyError =>
  new GrammyError('Call failed', { ok: false, error_code, description, parameters }, 'sendMessage', { text: 'private words' });

describe('telegram error mapping', () => {
  it('429 → retryAfterMs from parameters.retry_after', () => {
    const error = toSendError(apiError(429, 'Too Many Requests: retry after 7', { retry_after: 7 }), 'sendMessage', TOKEN);
    assert.ok(error instanceof SendError);
    assert.equal(error.retryAfterMs, 7000);
    assert.equal(error.permanent, false);
  });

  it('403 (blocked, kicked) and 400 (chat not found, …) are permanent', () => {
    for (const error of [apiError(403, 'Forbidden: bot was blocked by the user'), apiError(403, 'Forbidden: bot was kicked from the supergroup chat'), apiError(400, 'Bad Request: chat not found')]) {
      assert.equal(toSendError(error, 'sendMessage', TOKEN).permanent, true, error.description);
    }
  });

  it('network failures, 5xx, 401 and 409 are worth retrying', () => {
    for (const error of [new HttpError('Network request for sendMessage failed!', new Error('ECONNRESET')), apiError(502, 'Bad Gateway'), apiError(401, 'Unauthorized'), apiError(409, 'Conflict')]) {
      const mapped = toSendError(error, 'sendMessage', TOKEN);
      assert.equal(mapped.permanent, false);
      assert.equal(mapped.retryAfterMs, undefined);
    }
  });

  it('429 from any method is a wait for the chat, whatever the call (edits, chat actions, uploads)', () => {
    for (const method of ['editMessageText', 'sendChatAction', 'sendDocument']) {
      const error = toSendError(apiError(429, 'Too Many Requests: retry after 3', { retry_after: 3 }), method, TOKEN);
      assert.deepEqual([error.retryAfterMs, error.scope, error.permanent], [3000, 'chat', false], method);
    }
  });

  it('recognises a group upgraded to a supergroup (400 with migrate_to_chat_id)', () => {
    assert.equal(migratedTo(apiError(400, 'Bad Request: group chat was upgraded to a supergroup chat', { migrate_to_chat_id: -1009876543210 })), -1009876543210);
    assert.equal(migratedTo(apiError(400, 'Bad Request: chat not found')), undefined);
  });

  it('recognises markup rejections and unchanged edits', () => {
    assert.equal(isMarkupError(apiError(400, "Bad Request: can't parse entities: Unsupported start tag \"x\" at byte offset 0")), true);
    assert.equal(isMarkupError(apiError(400, 'Bad Request: chat not found')), false);
    assert.equal(isNotModified(apiError(400, 'Bad Request: message is not modified: specified new message content and reply markup are exactly the same')), true);
  });

  it('never leaks the token (node-fetch puts the URL in its message) nor message contents', () => {
    const network = new HttpError("Network request for 'getUpdates' failed!", new Error(`request to https://api.telegram.org/bot${TOKEN}/getUpdates failed, reason: socket hang up`));
    assert.doesNotMatch(describeError(network, TOKEN), /secret-token/);
    assert.match(describeError(network, TOKEN), /socket hang up/);
    const mapped = toSendError(apiError(400, 'Bad Request: chat not found'), 'sendMessage', TOKEN);
    assert.equal(mapped.cause, undefined, 'no grammY error (with its payload) attached');
    assert.doesNotMatch(mapped.message, /private words/);
  });
});
