import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { hexlify } from 'ethers';
import {
  BeaconApiError,
  BeaconBlobSource,
  BlobNotFoundError,
  BlobVerificationError,
  decodeBlob,
  slotAt,
  type ExecutionBlockReader,
} from '../src/index.js';

interface BeaconFixture {
  payloadUtf8: string;
  versionedHash: string;
  otherVersionedHash: string;
  slot: number;
  blockRoot: string;
  blockNumber: number;
  executionBlocks: Record<string, { timestamp: number; parentBeaconBlockRoot: string }>;
  responses: Record<string, unknown> & { blobs: { data: string[] } };
}

const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/beacon/beacon-blobs.json', import.meta.url), 'utf8'),
) as BeaconFixture;

const executionBlocks: ExecutionBlockReader = {
  getBlock: async (blockNumber) => fixture.executionBlocks[String(blockNumber)] ?? null,
};

/** Serves the recorded answers; `mode` lets a test make the node misbehave. */
let mode: 'recorded' | 'foreign-blob' | 'junk' | 'down' = 'recorded';
const requests: string[] = [];
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    requests.push(`${url.pathname}${url.search}`);
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (mode === 'down') return send(503, { code: 503, message: 'node is syncing' });
    const recorded = fixture.responses[url.pathname];
    if (recorded) return send(200, recorded);
    const blobs = /^\/eth\/v1\/beacon\/blobs\/([^/]+)$/.exec(url.pathname);
    if (blobs && (blobs[1] === String(fixture.slot) || blobs[1] === fixture.blockRoot)) {
      if (mode === 'junk') return send(200, { data: ['0x1234'] });
      const all = fixture.responses.blobs.data;
      // A node filters by versioned hash; the foreign mode answers with the wrong one instead.
      const wanted = url.searchParams.get('versioned_hashes')?.split(',') ?? [];
      const data =
        mode === 'foreign-blob'
          ? [all[0]]
          : all.filter(
              (_, index) =>
                wanted.length === 0 ||
                wanted.includes([fixture.otherVersionedHash, fixture.versionedHash][index]!),
            );
      return send(200, { ...fixture.responses.blobs, data });
    }
    return send(404, { code: 404, message: 'Block not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  mode = 'recorded';
  requests.length = 0;
});

describe('BeaconBlobSource', () => {
  it('resolves the slot from the block timestamp and the beacon genesis, then returns the verified blob', async () => {
    const source = new BeaconBlobSource({ baseUrl, executionBlocks });
    const blob = await source.fetchBlob(fixture.versionedHash, { blockNumber: fixture.blockNumber });

    expect(new TextDecoder().decode(decodeBlob(blob))).toBe(fixture.payloadUtf8);
    expect(hexlify(blob)).toBe(fixture.responses.blobs.data[1]);
    expect(requests).toEqual([
      '/eth/v1/beacon/genesis',
      '/eth/v1/config/spec',
      `/eth/v1/beacon/blobs/${fixture.slot}?versioned_hashes=${fixture.versionedHash}`,
    ]);

    // The genesis and slot length are read once.
    requests.length = 0;
    await source.fetchBlob(fixture.otherVersionedHash, { blockNumber: fixture.blockNumber });
    expect(requests).toEqual([
      `/eth/v1/beacon/blobs/${fixture.slot}?versioned_hashes=${fixture.otherVersionedHash}`,
    ]);
  });

  it("resolves the beacon block by the next execution block's parentBeaconBlockRoot", async () => {
    const source = new BeaconBlobSource({ baseUrl, executionBlocks, resolution: 'next-block-root' });
    const blob = await source.fetchBlob(fixture.versionedHash, { blockNumber: fixture.blockNumber });
    expect(new TextDecoder().decode(decodeBlob(blob))).toBe(fixture.payloadUtf8);
    expect(requests).toEqual([
      `/eth/v1/beacon/blobs/${fixture.blockRoot}?versioned_hashes=${fixture.versionedHash}`,
    ]);
  });

  it('refuses a blob that does not hash to the requested versioned hash, and junk', async () => {
    const source = new BeaconBlobSource({ baseUrl, executionBlocks, secondsPerSlot: 12 });
    mode = 'foreign-blob';
    await expect(
      source.fetchBlob(fixture.versionedHash, { blockNumber: fixture.blockNumber }),
    ).rejects.toBeInstanceOf(BlobVerificationError);
    mode = 'junk';
    await expect(
      source.fetchBlob(fixture.versionedHash, { blockNumber: fixture.blockNumber }),
    ).rejects.toBeInstanceOf(BlobVerificationError);
  });

  it('reports a blob or block it does not have as not found, and a failing node as a beacon API error', async () => {
    const source = new BeaconBlobSource({ baseUrl, executionBlocks, secondsPerSlot: 12 });
    const unknownHash = `0x01${'ab'.repeat(31)}`;
    await expect(source.fetchBlob(unknownHash, { blockNumber: fixture.blockNumber })).rejects.toBeInstanceOf(
      BlobNotFoundError,
    );
    await expect(source.fetchBlob(fixture.versionedHash, { blockNumber: 1 })).rejects.toBeInstanceOf(
      BlobNotFoundError,
    );
    mode = 'down';
    await expect(
      new BeaconBlobSource({ baseUrl, executionBlocks }).fetchBlob(fixture.versionedHash, {
        blockNumber: fixture.blockNumber,
      }),
    ).rejects.toBeInstanceOf(BeaconApiError);
  });

  it('computes slots on the grid and rejects timestamps off it', () => {
    const clock = { genesisTime: 1_000, secondsPerSlot: 12 };
    expect(slotAt(1_000, clock)).toBe(0);
    expect(slotAt(1_000 + 12 * 42, clock)).toBe(42);
    expect(() => slotAt(1_005, clock)).toThrow(RangeError);
    expect(() => slotAt(999, clock)).toThrow(RangeError);
  });
});
