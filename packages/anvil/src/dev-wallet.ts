import { Wallet, type Provider, type TransactionRequest } from 'ethers';

/**
 * A Wallet whose gas limits carry 20% headroom over the node's estimate. Nodes estimate against the
 * latest block, so a call that writes `block.timestamp` to storage is priced as a no-op rewrite when
 * the value is unchanged, yet runs a second later as a real write and can run out of gas.
 */
export class DevWallet extends Wallet {
  constructor(privateKey: string, provider?: Provider | null) {
    super(privateKey, provider);
  }

  override async estimateGas(tx: TransactionRequest): Promise<bigint> {
    return withGasHeadroom(await super.estimateGas(tx));
  }
}

export function withGasHeadroom(estimate: bigint): bigint {
  return (estimate * 6n) / 5n;
}
