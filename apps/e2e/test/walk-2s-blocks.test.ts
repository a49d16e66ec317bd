// The same walk (walk.test.ts) on a chain with 2-second blocks instead of automine (issue 28): the fast
// path keeps every step of it as it is on automine, block time hidden from the caller. The walk reads
// DEVNET_BLOCK_TIME when its stack starts (its beforeAll), after this module's body has run.
import { afterAll } from '@jest/globals';

process.env.DEVNET_BLOCK_TIME = '2';
// The test files of this package share one process: the next one walks on automine again.
afterAll(() => {
  delete process.env.DEVNET_BLOCK_TIME;
});
await import('./walk.test.js');
