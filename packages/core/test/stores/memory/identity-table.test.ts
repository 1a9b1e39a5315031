// The memory store's identity table against a plain Map: its own index finds what it holds
// through growth, removals, sweeps and eviction.
import { describe, expect, it } from 'vitest';
import type { KeyState } from '../../../src/algorithms/index.ts';
import { IdentityTable } from '../../../src/stores/memory/identity-table.ts';

/** A deterministic stream of numbers below `n`, so that a failure replays. */
function random(seed: number): (n: number) => number {
  let state = seed;
  return (n) => {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    return (state >>> 8) % n;
  };
}

/** Keys alike but for a few characters, as user ids and addresses are. */
const identityOf = (i: number) => `user-${i}`;
const NAMESPACES = ['s:{}:a', 's:{}:b', 's:{}:c'];

function insert(table: IdentityTable, identity: string, namespace: string, state: KeyState): void {
  expect(table.read(identity, namespace, 0)).toBeUndefined();
  table.insertAfterRead(identity, namespace, state);
}

describe('an IdentityTable', () => {
  it('finds exactly the keys a Map holds through inserts, removals and sweeps', () => {
    const table = new IdentityTable(1_000_000);
    const model = new Map<string, KeyState>();
    const next = random(1);
    for (let step = 0; step < 60_000; step++) {
      const identity = identityOf(next(5_000));
      const namespace = NAMESPACES[next(3)] as string;
      const key = `${namespace} ${identity}`;
      const held = table.find(identity, namespace);
      expect(held?.state).toBe(model.get(key));
      if (step % 20_000 === 19_999) {
        // Expire about half, by the states' own times: the index shrinks as identities go.
        table.sweep(500);
        for (const [k, state] of model) if (state.expiresAt <= 500) model.delete(k);
      } else if (held === undefined) {
        const state = { expiresAt: next(1_000) + 1 };
        insert(table, identity, namespace, state);
        model.set(key, state);
      } else if (next(3) === 0) {
        table.remove(identity, held);
        model.delete(key);
      }
      expect(table.size).toBe(model.size);
    }
    for (let i = 0; i < 5_000; i++) {
      for (const namespace of NAMESPACES) {
        expect(table.find(identityOf(i), namespace)?.state).toBe(
          model.get(`${namespace} ${identityOf(i)}`),
        );
      }
    }
  });

  it("reads an expired key as absent: the new state takes its place, or it is dropped, keeping its identity's other keys", () => {
    const table = new IdentityTable(100);
    const [a, b] = NAMESPACES as [string, string];
    insert(table, 'user', a, { expiresAt: 10 });
    const live = { expiresAt: 100 };
    insert(table, 'user', b, live);
    expect(table.read('user', a, 10)).toBeUndefined();
    // The state that usually follows takes the expired key's place: no key more.
    const renewed = { expiresAt: 50 };
    table.insertAfterRead('user', a, renewed);
    expect(table.size).toBe(2);
    expect(table.read('user', a, 20)?.state).toBe(renewed);
    // None follows: dropped when asked, or by the next read, and never revived by an earlier clock.
    expect(table.read('user', a, 50)).toBeUndefined();
    table.dropDead();
    expect(table.size).toBe(1);
    expect(table.read('user', a, 0)).toBeUndefined();
    insert(table, 'user', a, { expiresAt: 60 });
    expect(table.read('user', a, 60)).toBeUndefined();
    expect(table.read('user', b, 60)?.state).toBe(live);
    expect(table.size).toBe(1);
  });

  it('removes a key found expired once, whether removed, swept or read past', () => {
    const table = new IdentityTable(100);
    const [a, b] = NAMESPACES as [string, string];
    insert(table, 'user', a, { expiresAt: 10 });
    insert(table, 'user', b, { expiresAt: 100 });
    expect(table.read('user', a, 10)).toBeUndefined();
    const dead = table.find('user', a);
    if (dead !== undefined) table.remove('user', dead);
    table.sweep(10);
    expect(table.size).toBe(1);
    expect(table.read('user', b, 10)).toBeDefined();
    insert(table, 'other', a, { expiresAt: 10 });
    expect(table.read('other', a, 20)).toBeUndefined();
    table.sweep(20);
    expect(table.size).toBe(1);
    expect(table.read('other', a, 0)).toBeUndefined();
    expect(table.size).toBe(1);
  });

  it('holds at most maxKeys keys, each as it was filed, through a churn of new keys and removals', () => {
    const maxKeys = 1_000;
    const table = new IdentityTable(maxKeys);
    const states = new Map<string, KeyState>();
    const next = random(2);
    for (let step = 0; step < 50_000; step++) {
      const identity = identityOf(next(20_000));
      const namespace = NAMESPACES[next(2)] as string;
      const entry = table.read(identity, namespace, 0);
      if (entry === undefined) {
        const state = { expiresAt: 1 };
        table.insertAfterRead(identity, namespace, state);
        states.set(`${namespace} ${identity}`, state);
      } else if (next(4) === 0) {
        table.remove(identity, entry);
      }
      expect(table.size).toBeLessThanOrEqual(maxKeys);
    }
    // Every key still held is found with its own state, and the held keys are `size` in number.
    let found = 0;
    for (let i = 0; i < 20_000; i++) {
      for (const namespace of NAMESPACES.slice(0, 2)) {
        const entry = table.find(identityOf(i), namespace);
        if (entry === undefined) continue;
        found++;
        expect(entry.state).toBe(states.get(`${namespace} ${identityOf(i)}`));
      }
    }
    expect(found).toBe(table.size);
    // All expire at once, and the table starts over empty.
    table.sweep(1);
    expect(table.size).toBe(0);
    insert(table, 'again', NAMESPACES[0] as string, { expiresAt: 5 });
    expect(table.find('again', NAMESPACES[0] as string)?.state.expiresAt).toBe(5);
  });

  it('tells identities apart whose characters differ anywhere', () => {
    const table = new IdentityTable(1_000_000);
    const namespace = NAMESPACES[0] as string;
    const identities = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      identities.add(`${i}`);
      identities.add(`${i}`.padStart(12, '0'));
      identities.add(`~${i.toString(36)}~`);
      identities.add(`10.0.${i >> 8}.${i & 255}`);
    }
    for (const identity of identities) insert(table, identity, namespace, { expiresAt: 1 });
    expect(table.size).toBe(identities.size);
    for (const identity of identities) {
      expect(table.find(identity, namespace)?.identity).toBe(identity);
      expect(table.find(`${identity}x`, namespace)).toBeUndefined();
    }
  });
});
