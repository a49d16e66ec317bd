import type { BlobLocation, BlobSource } from './blob-source.js';
import { beaconData, getBeaconJson, type BeaconHttpOptions } from './beacon-http.js';
import { fetchBlobFromBlobsEndpoint } from './blobs-endpoint.js';
import { BeaconApiError, BlobNotFoundError } from './errors.js';

/** The execution-layer facts the beacon source needs; an ethers Provider fits. */
export interface ExecutionBlockReader {
  getBlock(
    blockNumber: number,
  ): Promise<{ readonly timestamp: number; readonly parentBeaconBlockRoot?: string | null } | null>;
}

/**
 * How an execution block is found on the beacon chain: by slot, computed from the block timestamp
 * and the beacon genesis (one extra execution read), or by the beacon block root that the NEXT
 * execution block records as `parentBeaconBlockRoot` (exact even across forks, but only once the
 * next block exists).
 */
export type BeaconBlockResolution = 'slot-from-timestamp' | 'next-block-root';

export interface BeaconBlobSourceOptions extends BeaconHttpOptions {
  readonly executionBlocks: ExecutionBlockReader;
  readonly resolution?: BeaconBlockResolution;
  /** Skips the spec request; mainnet and the testnets use 12. */
  readonly secondsPerSlot?: number;
}

interface BeaconClock {
  readonly genesisTime: number;
  readonly secondsPerSlot: number;
}

/** A real beacon node's blobs endpoint, addressed by slot or block root. */
export class BeaconBlobSource implements BlobSource {
  readonly #options: BeaconBlobSourceOptions;
  #clock: Promise<BeaconClock> | undefined;

  constructor(options: BeaconBlobSourceOptions) {
    this.#options = options;
  }

  async fetchBlob(versionedHash: string, location: BlobLocation): Promise<Uint8Array> {
    const blockId = await this.beaconBlockIdOf(location.blockNumber, versionedHash);
    return fetchBlobFromBlobsEndpoint(this.#options, blockId, versionedHash);
  }

  /** The beacon block id (slot number or block root) that carries execution block `blockNumber`. */
  async beaconBlockIdOf(blockNumber: number, versionedHash = ''): Promise<string> {
    if ((this.#options.resolution ?? 'slot-from-timestamp') === 'next-block-root') {
      const next = await this.#options.executionBlocks.getBlock(blockNumber + 1);
      const root = next?.parentBeaconBlockRoot;
      if (!root) throw new BlobNotFoundError(versionedHash, `after execution block ${blockNumber}`);
      return root;
    }
    const [block, clock] = await Promise.all([
      this.#options.executionBlocks.getBlock(blockNumber),
      this.#beaconClock(),
    ]);
    if (!block) throw new BlobNotFoundError(versionedHash, `execution block ${blockNumber}`);
    return String(slotAt(block.timestamp, clock));
  }

  #beaconClock(): Promise<BeaconClock> {
    if (!this.#clock) {
      const reading = this.#readBeaconClock();
      reading.catch(() => {
        if (this.#clock === reading) this.#clock = undefined;
      });
      this.#clock = reading;
    }
    return this.#clock;
  }

  async #readBeaconClock(): Promise<BeaconClock> {
    const genesisPath = 'eth/v1/beacon/genesis';
    const genesis = beaconData(await requireBody(this.#options, genesisPath), genesisPath) as {
      genesis_time?: unknown;
    };
    const genesisTime = positiveInteger(genesis.genesis_time, 'genesis_time', genesisPath);
    if (this.#options.secondsPerSlot !== undefined)
      return { genesisTime, secondsPerSlot: this.#options.secondsPerSlot };
    const specPath = 'eth/v1/config/spec';
    const spec = beaconData(await requireBody(this.#options, specPath), specPath) as {
      SECONDS_PER_SLOT?: unknown;
    };
    return {
      genesisTime,
      secondsPerSlot: positiveInteger(spec.SECONDS_PER_SLOT, 'SECONDS_PER_SLOT', specPath),
    };
  }
}

/** Slot of a block with `timestamp`; a timestamp off the slot grid means the clock is not this chain's. */
export function slotAt(timestamp: number, clock: BeaconClock): number {
  const sinceGenesis = timestamp - clock.genesisTime;
  if (sinceGenesis < 0 || sinceGenesis % clock.secondsPerSlot !== 0) {
    throw new RangeError(
      `timestamp ${timestamp} is not on the slot grid of genesis ${clock.genesisTime} / ${clock.secondsPerSlot} s`,
    );
  }
  return sinceGenesis / clock.secondsPerSlot;
}

async function requireBody(http: BeaconHttpOptions, path: string): Promise<unknown> {
  const body = await getBeaconJson(http, path);
  if (body === null) throw new BeaconApiError(path, 404, `beacon API has no ${path}`);
  return body;
}

function positiveInteger(value: unknown, field: string, path: string): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(number) || number <= 0) {
    throw new BeaconApiError(path, 200, `beacon API ${path}: ${field} is not a positive integer`);
  }
  return number;
}
