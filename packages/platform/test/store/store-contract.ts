import { afterAll, beforeAll, describe } from '@jest/globals';
import { channelsContract } from './contract/channels.contract.js';
import { concurrencyLeasesContract } from './contract/concurrency-leases.contract.js';
import { countersContract } from './contract/counters.contract.js';
import { exclusiveLocksContract } from './contract/exclusive-locks.contract.js';
import { expiringValuesContract } from './contract/expiring-values.contract.js';
import type { StoreContractFixture, StoreContractSetup } from './contract/fixture.js';
import { frameStreamsContract } from './contract/frame-streams.contract.js';
import { lifecycleContract } from './contract/lifecycle.contract.js';
import { noncesContract } from './contract/nonces.contract.js';
import { presenceContract } from './contract/presence.contract.js';
import { queuesContract } from './contract/queues.contract.js';
import { rateWindowsContract } from './contract/rate-windows.contract.js';
import { revocationsContract } from './contract/revocations.contract.js';
import { talliesContract } from './contract/tallies.contract.js';

export type { StoreContractFixture, StoreContractSetup } from './contract/fixture.js';

/** The one behaviour every Store implementation must show; each implementation's test file runs it. */
export function describeStoreContract(name: string, setup: StoreContractSetup): void {
  describe(`${name} (store contract)`, () => {
    let fixture: StoreContractFixture | undefined;
    const use = (): StoreContractFixture => {
      if (fixture === undefined) throw new Error('the store fixture is not set up');
      return fixture;
    };

    beforeAll(async () => {
      fixture = await setup();
    });
    afterAll(async () => {
      await fixture?.dispose();
    });

    rateWindowsContract(use);
    concurrencyLeasesContract(use);
    exclusiveLocksContract(use);
    expiringValuesContract(use);
    countersContract(use);
    talliesContract(use);
    frameStreamsContract(use);
    queuesContract(use);
    presenceContract(use);
    noncesContract(use);
    revocationsContract(use);
    channelsContract(use);
    lifecycleContract(use);
  });
}
