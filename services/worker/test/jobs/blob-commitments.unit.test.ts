import { describe, expect, it } from '@jest/globals';
import { blobSidecarOf, commitsTo, type BlobSource } from '@svc/chain';
import { BlobCommitments } from '../../src/jobs/blob-commitments.js';
import { PromptReader } from '../../src/jobs/prompt-reader.js';

describe('BlobCommitments', () => {
  it('computes a shared blob once for all its jobs, and another blob under the same commitment afresh', async () => {
    const shared = blobSidecarOf(new Uint8Array([1, 2, 3]), new Uint8Array([4, 5, 6]));
    const other = blobSidecarOf(new Uint8Array([7, 8, 9]));
    const computed: Uint8Array[] = [];
    const commitments = new BlobCommitments((blob, commitment) => {
      computed.push(blob);
      return commitsTo(blob, commitment);
    });
    const offers = await Promise.all(
      [1, 2, 3].map(() => commitments.commitsTo(shared.data, shared.commitment)),
    );
    expect(offers).toEqual([true, true, true]);
    expect(computed).toHaveLength(1);
    // Another blob offered under a commitment already checked is computed, and refused.
    expect(await commitments.commitsTo(other.data, shared.commitment)).toBe(false);
    expect(computed).toHaveLength(2);
    expect(await commitments.commitsTo(other.data, other.commitment)).toBe(true);
    expect(computed).toHaveLength(3);
  });

  it('keeps a blob that matched by its versioned hash, and only such a blob', async () => {
    const shared = blobSidecarOf(new Uint8Array([1, 2, 3]), new Uint8Array([4, 5, 6]));
    const other = blobSidecarOf(new Uint8Array([7, 8, 9]));
    const commitments = new BlobCommitments();
    expect(commitments.verified(shared.versionedHash)).toBeUndefined();
    expect(await commitments.commitsTo(other.data, shared.commitment)).toBe(false);
    expect(commitments.verified(shared.versionedHash)).toBeUndefined();
    expect(await commitments.commitsTo(shared.data, shared.commitment)).toBe(true);
    expect(commitments.verified(shared.versionedHash.toUpperCase().replace('0X', '0x'))).toEqual(shared.data);
  });
});

describe('PromptReader', () => {
  it('reads a job of a blob it checked from memory, neither fetching nor computing it again', async () => {
    const sidecar = blobSidecarOf(new Uint8Array([1, 2, 3]), new Uint8Array([4, 5, 6]));
    const fetched: string[] = [];
    const blobSource: BlobSource = {
      fetchBlob: async (versionedHash) => {
        fetched.push(versionedHash);
        return sidecar.data;
      },
    };
    let computed = 0;
    const reader = new PromptReader({
      blobSource,
      chainId: 31337n,
      jobRegistry: '0x00000000000000000000000000000000000000dd',
      models: [],
      blobCommitments: new BlobCommitments((blob, commitment) => {
        computed += 1;
        return commitsTo(blob, commitment);
      }),
    });
    const place = { promptBlobHash: sidecar.versionedHash, promptIndex: 1, blockNumber: 1 };
    // Not checked yet: read from the source. The prompt does not open (no session key): refused after the read.
    await expect(reader.read(place, 1n, {} as never, {} as never)).rejects.toMatchObject({
      reason: 'undecryptable_prompt',
    });
    expect(fetched).toEqual([sidecar.versionedHash]);
    expect(await reader.commitsTo(sidecar.data, sidecar.commitment)).toBe(true);
    await expect(
      reader.read({ ...place, blockNumber: 2 }, 1n, {} as never, {} as never),
    ).rejects.toMatchObject({
      reason: 'undecryptable_prompt',
    });
    expect(fetched).toHaveLength(1);
    expect(computed).toBe(1);
  });

  it('reads the jobs of one blob announced before their offers with one fetch; a failed fetch is tried again', async () => {
    const sidecar = blobSidecarOf(new Uint8Array([1, 2, 3]), new Uint8Array([4, 5, 6]));
    let fetches = 0;
    let failNext = true;
    const blobSource: BlobSource = {
      fetchBlob: async () => {
        fetches += 1;
        await new Promise((resolve) => setTimeout(resolve, 10));
        if (failNext) {
          failNext = false;
          throw new Error('source down');
        }
        return sidecar.data;
      },
    };
    const reader = new PromptReader({
      blobSource,
      chainId: 31337n,
      jobRegistry: '0x00000000000000000000000000000000000000dd',
      models: [],
      blobFetchAttempts: 1,
    });
    const read = (promptIndex: number) =>
      reader.read(
        { promptBlobHash: sidecar.versionedHash, promptIndex, blockNumber: 1 },
        1n,
        {} as never,
        {} as never,
      );
    // The source fails: every job that waited on that fetch is refused, nothing remembered.
    const first = await Promise.allSettled([read(0), read(1)]);
    expect(first.map((outcome) => outcome.status === 'rejected' && outcome.reason.reason)).toEqual([
      'blob_unavailable',
      'blob_unavailable',
    ]);
    expect(fetches).toBe(1);
    // Then one fetch serves the batch's three jobs (each refused later, for want of a session key).
    const reads = await Promise.allSettled([read(0), read(1), read(0)]);
    expect(reads.map((outcome) => outcome.status === 'rejected' && outcome.reason.reason)).toEqual([
      'undecryptable_prompt',
      'undecryptable_prompt',
      'undecryptable_prompt',
    ]);
    expect(fetches).toBe(2);
    await read(1).catch(() => undefined);
    expect(fetches).toBe(2);
  });
});
