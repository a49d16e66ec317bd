export { startAnvil, type AnvilAccount, type AnvilInstance, type AnvilOptions } from './anvil.js';
export { resolveAnvilBinary } from './anvilBinary.js';
export { BYTES_PER_BLOB, prepareBlob, randomBlob, sendWithBlobs, type PreparedBlob } from './blobs.js';
export { loadKzg } from './kzg.js';
export { createTestProvider, type TestProviderOptions } from './provider.js';
export { ChainClock } from './chainClock.js';
export { TestWallet, withGasHeadroom } from './wallet.js';
export { isProcessAlive } from './process.js';
