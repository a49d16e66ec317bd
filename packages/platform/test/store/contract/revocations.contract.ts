import { describe, expect, it } from '@jest/globals';
import { uniqueKey, type UseFixture } from './fixture.js';

export function revocationsContract(use: UseFixture): void {
  describe('revocations', () => {
    it('shows a mark to every replica as soon as mark resolves', async () => {
      const [first, second] = use().replicas;
      const keyId = uniqueKey('key');
      expect(await second.revocations.isMarked(keyId)).toBe(false);
      await first.revocations.mark(keyId);
      expect(await second.revocations.isMarked(keyId)).toBe(true);
      await second.revocations.mark(keyId);
      expect(await first.revocations.isMarked(keyId)).toBe(true);
    });

    it('answers a batch with the marked ids among it', async () => {
      const [first, second] = use().replicas;
      const [a, b, c] = [uniqueKey('key'), uniqueKey('key'), uniqueKey('key')];
      await first.revocations.mark(a);
      await first.revocations.mark(c);
      expect(await second.revocations.markedAmong([a, b, c])).toEqual(new Set([a, c]));
      expect(await second.revocations.markedAmong([b])).toEqual(new Set());
      expect(await second.revocations.markedAmong([])).toEqual(new Set());
    });
  });
}
