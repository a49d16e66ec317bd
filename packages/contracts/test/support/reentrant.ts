import { Contract, ContractFactory } from 'ethers';
import { reentrantAccountAbi, reentrantAccountBytecode, type ReentrantAccount } from '../gen/index.js';
import type { Actor, Chain } from './chain.js';

/** A contract account controlled by `controller` that tries to re-enter whoever pays it. */
export async function deployReentrantAccount(chain: Chain, controller: Actor): Promise<ReentrantAccount> {
  const factory = new ContractFactory(
    reentrantAccountAbi,
    reentrantAccountBytecode,
    chain.signers[controller],
  );
  const deployed = await factory.deploy();
  await deployed.waitForDeployment();
  return new Contract(
    await deployed.getAddress(),
    reentrantAccountAbi,
    chain.signers[controller],
  ) as unknown as ReentrantAccount;
}
