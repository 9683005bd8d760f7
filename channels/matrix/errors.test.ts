import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MatrixError } from 'matrix-js-sdk';
import { SendError, type OutboundMessage } from '../../src/channel.ts';
import { describeError, toSendError } from './errors.ts';
import { transactionId } from './index.ts';
import { Rooms } from './rooms.ts';

const failure = (errcode: string, status: number, extra: Record<string, unknown> = {}): MatrixError => new MatrixError({ errcode, error: `${errcode} happened`, ...extra }, status);

describe('matrix errors → SendError', () => {
  it('waits retry_after_ms on M_LIMIT_EXCEEDED (or a bare 429), 1 s without a hint', () => {
    assert.deepEqual(pick(toSendError(failure('M_LIMIT_EXCEEDED', 429, { retry_after_ms: 2500 }), 'send')), { permanent: false, retryAfterMs: 2500 });
    assert.deepEqual(pick(toSendError(failure('M_LIMIT_EXCEEDED', 429), 'send')), { permanent: false, retryAfterMs: 1000 });
    const headers = new Headers({ 'Retry-After': '3' });
    assert.deepEqual(pick(toSendError(new MatrixError({ errcode: 'M_UNKNOWN', error: 'slow down' }, 429, undefined, undefined, headers), 'send')), { permanent: false, retryAfterMs: 3000 });
  });

  it('prefers the Retry-After header (spec v1.10) to the deprecated retry_after_ms, and the wait covers the whole account', () => {
    // Synapse (synapse/api/errors.py LimitExceededError) sends both: retry_after_ms, and Retry-After in whole seconds rounded up.
    const synapse = new MatrixError({ errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests', retry_after_ms: 2500 }, 429, undefined, undefined, new Headers({ 'Retry-After': '3' }));
    const error = toSendError(synapse, 'send');
    assert.deepEqual(pick(error), { permanent: false, retryAfterMs: 3000 });
    assert.equal(error.scope, 'channel', "Synapse's rc_message is per user: every room waits");
    const headerOnly = new MatrixError({ errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests' }, 429, undefined, undefined, new Headers({ 'Retry-After': '7' }));
    assert.deepEqual(pick(toSendError(headerOnly, 'edit')), { permanent: false, retryAfterMs: 7000 });
    const garbled = new MatrixError({ errcode: 'M_LIMIT_EXCEEDED', error: 'Too Many Requests', retry_after_ms: 1200 }, 429, undefined, undefined, new Headers({ 'Retry-After': 'soon' }));
    assert.deepEqual(pick(toSendError(garbled, 'send')), { permanent: false, retryAfterMs: 1200 }, 'a malformed header falls back to the body');
  });

  it('gives up on what retrying cannot fix: forbidden, unknown token, not found, too large, other 4xx', () => {
    for (const [code, status] of [['M_FORBIDDEN', 403], ['M_UNKNOWN_TOKEN', 401], ['M_NOT_FOUND', 404], ['M_TOO_LARGE', 413], ['M_UNKNOWN', 400]] as const) {
      assert.equal(toSendError(failure(code, status), 'send').permanent, true, code);
    }
    assert.match(toSendError(failure('M_UNKNOWN_TOKEN', 401), 'send').message, /access token was rejected/);
  });

  it('retries server errors and network failures', () => {
    assert.deepEqual(pick(toSendError(failure('M_UNKNOWN', 502), 'send')), { permanent: false, retryAfterMs: undefined });
    assert.deepEqual(pick(toSendError(new TypeError('fetch failed'), 'send')), { permanent: false, retryAfterMs: undefined });
    const same = new SendError('x', { permanent: true });
    assert.equal(toSendError(same, 'send'), same);
  });

  it('never puts the token in a description', () => {
    assert.equal(describeError(new Error('bad syt_secret here'), 'syt_secret'), 'Error: bad <token> here');
  });
});

describe('matrix transaction ids', () => {
  const message: OutboundMessage = { channel: 'matrix', account: '@b:x', chat: '!r:x', text: 'hello', replyTo: '$in' };
  it('are the same for the same reply part (the homeserver deduplicates a retry), different otherwise', () => {
    assert.equal(transactionId('send', message), transactionId('send', { ...message }));
    assert.notEqual(transactionId('send', message), transactionId('send', { ...message, text: 'hello!' }));
    assert.notEqual(transactionId('send', message), transactionId('send', { ...message, replyTo: '$other' }));
    assert.notEqual(transactionId('send', message), transactionId('draft', message));
    assert.equal(transactionId('send', { ...message, replyTo: undefined } as OutboundMessage), undefined, 'without the inbound id: a fresh one each time');
  });
});

describe('matrix rooms', () => {
  const member = (user: string, membership: string, displayname?: string) => ({ type: 'm.room.member', state_key: user, content: { membership, ...(displayname ? { displayname } : {}) } });
  it('knows DMs (two people, m.direct, a direct invite), encryption (once) and display names', () => {
    const rooms = new Rooms();
    rooms.apply('!dm', member('@bot:x', 'join'));
    rooms.apply('!dm', member('@alice:x', 'join', 'Alice'));
    rooms.apply('!group', member('@bot:x', 'join'));
    rooms.apply('!group', member('@alice:x', 'join'));
    rooms.apply('!group', member('@bob:x', 'invite'));
    assert.equal(rooms.isDirect('!dm'), true);
    assert.equal(rooms.isDirect('!group'), false);
    rooms.apply('!group', member('@bob:x', 'leave'));
    assert.equal(rooms.isDirect('!group'), true, 'down to two people');
    rooms.setDirectRooms({ '@carol:x': ['!big'] });
    assert.equal(rooms.isDirect('!big'), true);
    rooms.markDirectInvite('!inv');
    assert.equal(rooms.isDirect('!inv'), true);
    assert.equal(rooms.displayName('!dm', '@alice:x'), 'Alice');
    assert.equal(rooms.apply('!dm', { type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }), true);
    assert.equal(rooms.apply('!dm', { type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }), false, 'said once');
    assert.equal(rooms.isEncrypted('!dm'), true);
    assert.deepEqual(rooms.joined('@bot:x').sort(), ['!dm', '!group']);
  });
});

function pick(error: SendError): { permanent: boolean; retryAfterMs: number | undefined } {
  return { permanent: error.permanent, retryAfterMs: error.retryAfterMs };
}
