import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCommand } from '../security/commands.ts';
import { componentMatcher } from './shell-glob.ts';

/** The matcher for the pattern of the single word `word`, as the parser builds it. */
function matcher(word: string): (name: string) => boolean {
  const parsed = parseCommand(`ls ${word}`);
  assert.ok(parsed.ok);
  const test = componentMatcher(parsed.segments[0]!.words[1]!.pattern);
  assert.ok(test, `${word} is a wildcard`);
  return test;
}

describe('componentMatcher', () => {
  it('matches *, ? and brackets like sh, never a leading dot', () => {
    assert.ok(matcher('*.md')('a.md'));
    assert.ok(!matcher('*.md')('.hidden.md'));
    assert.ok(matcher('?.md')('é.md'), '? is one character, not one byte');
    assert.ok(!matcher('?.md')('ab.md'));
    assert.ok(matcher('x[a-c]')('xb') && !matcher('x[a-c]')('xd'));
    assert.ok(matcher('x[!a]')('xb') && !matcher('x[!a]')('xa'));
    assert.ok(matcher('x[^a]')('xb') && !matcher('x[^a]')('xa'));
    assert.ok(matcher('x[]]')('x]'), '] first in a bracket is literal');
    assert.ok(matcher('x[[:digit:]]')('x7') && !matcher('x[[:digit:]]')('xa'));
    assert.ok(!matcher('x[z-a]*')('xa'), 'a backwards range matches nothing');
  });

  it('keeps quoted parts literal inside a wildcard word', () => {
    assert.ok(matcher('"*"*')('*x') && !matcher('"*"*')('ax'));
    assert.ok(matcher("'['*")('[x') && !matcher("'['*")('x'));
    assert.ok(matcher('a\\?*')('a?b') && !matcher('a\\?*')('abb'));
    const unclosed = parseCommand('ls x[ab');
    assert.ok(unclosed.ok);
    assert.equal(componentMatcher(unclosed.segments[0]!.words[1]!.pattern), undefined, 'an unclosed [ is literal');
  });

  it('treats regex characters in names as text', () => {
    assert.ok(matcher("'a.(b)+$'*")('a.(b)+$c'));
    assert.ok(!matcher('a.*')('abc'));
  });

  it('is not a wildcard when everything is quoted', () => {
    const parsed = parseCommand(`ls '*' \\?`);
    assert.ok(parsed.ok);
    for (const word of parsed.segments[0]!.words.slice(1)) assert.equal(componentMatcher(word.pattern), undefined);
  });
});
