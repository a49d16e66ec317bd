import { JsonRpcProvider, Network } from 'ethers';

export interface DevProviderOptions {
  /** How often ethers polls for receipts and new blocks; match it to the block time. */
  pollingIntervalMs?: number;
}

/**
 * A JsonRpcProvider for a local chain: no response cache (ethers otherwise serves identical calls,
 * such as the pending nonce, from a 250 ms cache, so back-to-back sends collide), a fixed network
 * (no chain-id probe per request) and a short polling interval.
 */
export function createDevProvider(
  rpcUrl: string,
  chainId: number,
  options: DevProviderOptions = {},
): JsonRpcProvider {
  const network = Network.from(chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    pollingInterval: options.pollingIntervalMs ?? 25,
  });
  return provider;
}
