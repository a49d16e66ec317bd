import { describe, expect, it } from '@jest/globals';
import { concurrently, uniqueKey, type UseFixture } from './fixture.js';

export function noncesContract(use: UseFixture): void {
  describe('nonces', () => {
    it('hands 100 concurrent allocations across replicas 100 consecutive nonces from the floor', async () => {
      const { replicas } = use();
      const account = uniqueKey('0xsender');
      const nonces = await concurrently(replicas, 100, (store) => store.nonces.allocate(account, 7));
      expect([...nonces].sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => 7 + i));
      expect(await replicas[1].nonces.peek(account)).toBe(107);
    });

    it('jumps up to a higher chain floor but never goes back below what it handed out', async () => {
      const [first, second] = use().replicas;
      const account = uniqueKey('0xsender');
      expect(await first.nonces.peek(account)).toBeNull();
      expect(await first.nonces.allocate(account, 0)).toBe(0);
      expect(await second.nonces.allocate(account, 0)).toBe(1);
      expect(await first.nonces.allocate(account, 40)).toBe(40);
      expect(await second.nonces.allocate(account, 3)).toBe(41);
    });

    it('restarts from the nonce given to reset, for recovery', async () => {
      const [first, second] = use().replicas;
      const account = uniqueKey('0xsender');
      for (let i = 0; i < 5; i++) await first.nonces.allocate(account, 0);
      await second.nonces.reset(account, 2);
      expect(await first.nonces.peek(account)).toBe(2);
      expect(await first.nonces.allocate(account, 0)).toBe(2);
      expect(await second.nonces.allocate(account, 10)).toBe(10);
    });

    it('keeps accounts apart', async () => {
      const [store] = use().replicas;
      const [one, other] = [uniqueKey('0xsender'), uniqueKey('0xsender')];
      expect(await store.nonces.allocate(one, 5)).toBe(5);
      expect(await store.nonces.allocate(other, 0)).toBe(0);
    });
  });
}
