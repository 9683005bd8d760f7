import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { duplicateKeys, logKeyWatcher, logLinesWithDuplicateKeys } from './support/log-keys.ts';

describe('log lines never repeat a key', () => {
  it('finds a key repeated in one object, at any depth, and only there', () => {
    assert.deepEqual(duplicateKeys('{"channel":"irc","msg":"x","channel":"#probe"}'), ['$.channel']);
    assert.deepEqual(duplicateKeys('{"a":{"b":1,"b":[{"c":1,"c":2}]},"d":"\\"b\\":1"}'), ['$.a.b', '$.a.b[0].c']);
    assert.deepEqual(duplicateKeys('{"a":{"x":1},"b":{"x":1},"s":"{\\"a\\":1,\\"a\\":2}"}'), []);
    assert.deepEqual(duplicateKeys('{"n":-1.5e3,"t":true,"f":false,"z":null,"e":{},"l":[]}'), []);
  });

  it('catches what pino writes for a child binding and a call field of the same name', () => {
    const lines: string[] = [];
    const log = pino({ base: undefined }, { write: (line: string) => lines.push(line) }).child({ channel: 'irc' });
    log.info({ channel: '#probe' }, 'joined');
    log.info({ room: '#probe' }, 'joined');
    assert.equal(logLinesWithDuplicateKeys(lines.join('')).length, 1, 'pino does not dedupe: the check has to');
  });

  it('reads a stream in chunks that cut lines anywhere', () => {
    const problems: string[] = [];
    const watcher = logKeyWatcher((problem) => problems.push(problem));
    const text = '{"a":1,"a":2}\nplain text {not json\n{"b":1}\n{"c":1,"c":1}\n';
    for (let i = 0; i < text.length; i += 3) watcher.feed(text.slice(i, i + 3));
    assert.equal(problems.length, 2);
    assert.match(problems[0]!, /key \$\.a repeated/);
  });
});
