import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BoundedMap, BoundedSet } from './bounded-map.ts';

describe('BoundedMap', () => {
  it('keeps the newest `limit` entries, setNewest refreshing an entry', () => {
    const map = new BoundedMap<string, number>(3);
    for (let i = 0; i < 100_000; i++) map.setNewest(`k${i}`, i);
    assert.equal(map.size, 3);
    map.setNewest('k99997', 0);
    map.setNewest('new', 1);
    assert.deepEqual([map.has('k99998'), map.has('k99997'), map.has('k99999'), map.has('new')], [false, true, true, true]);
    map.delete('new');
    assert.equal(map.size, 2);
  });

  it('set keeps an existing key in its place, so it is still forgotten first', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1).set('b', 2).set('a', 3).set('c', 4);
    assert.deepEqual([...map], [['b', 2], ['c', 4]]);
  });

  it('setNewest tells which keys it forgot', () => {
    const map = new BoundedMap<string, number>(2);
    assert.deepEqual(map.setNewest('a', 1), []);
    map.setNewest('b', 2);
    assert.deepEqual(map.setNewest('c', 3), ['a']);
    assert.deepEqual(map.setNewest('b', 4), []);
    assert.deepEqual([...map.keys()], ['c', 'b']);
  });
});

describe('BoundedSet', () => {
  it('forgets the first added beyond the limit', () => {
    const set = new BoundedSet<string>(2);
    set.add('a').add('b').add('a').add('c');
    assert.deepEqual([...set], ['b', 'c']);
  });
});
