export { startAnvil, type AnvilAccount, type AnvilInstance, type AnvilOptions } from './anvil.js';
export { resolveAnvilBinary } from './anvil-binary.js';
export { BYTES_PER_BLOB, prepareBlob, randomBlob, sendWithBlobs, type PreparedBlob } from './blobs.js';
export { loadKzg } from './kzg.js';
export { createDevProvider, type DevProviderOptions } from './dev-provider.js';
export { DevWallet, withGasHeadroom } from './dev-wallet.js';
export { ChainClock } from './chain-clock.js';
export { isProcessAlive } from './process.js';
