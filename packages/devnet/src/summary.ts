import { formatEther } from 'ethers';
import type { DevnetDescription } from './description.js';

/** Lines for a person at a terminal: where the chain is, what is deployed, who is who. No keys. */
export function humanSummary(description: DevnetDescription, descriptionPath: string | undefined): string[] {
  const mining =
    description.blockTimeSeconds === null
      ? 'a block per transaction'
      : `a block every ${description.blockTimeSeconds} s`;
  const nameWidth = Math.max(...description.models.map((model) => model.name.length));
  const roleWidth = Math.max(...description.accounts.map((account) => account.role.length));
  return [
    `devnet up: chain ${description.chainId} at ${description.rpcUrl} (${mining})`,
    `  JobRegistry     ${description.contracts.jobRegistry}`,
    `  WorkerRegistry  ${description.contracts.workerRegistry}`,
    `  deployed in block ${description.contracts.deploymentBlock}; no workers registered`,
    '  models (send the id verbatim):',
    ...description.models.map(
      (model) =>
        `    ${model.name.padEnd(nameWidth)}  fee ${model.feeWei} wei (${formatEther(model.feeWei)} ETH)`,
    ),
    '  accounts:',
    ...description.accounts.map(
      (account) => `    ${account.role.padEnd(roleWidth)}  ${account.address}  ${account.purpose}`,
    ),
    descriptionPath
      ? `  description (with the accounts' dev keys): ${descriptionPath}`
      : '  description: not written to a file',
  ];
}

/** The same facts as one structured log field; the logger never sees a private key. */
export function loggableSummary(description: DevnetDescription, descriptionPath: string | undefined) {
  return {
    rpcUrl: description.rpcUrl,
    chainId: description.chainId,
    blockTimeSeconds: description.blockTimeSeconds,
    jobRegistry: description.contracts.jobRegistry,
    workerRegistry: description.contracts.workerRegistry,
    deploymentBlock: description.contracts.deploymentBlock,
    models: description.models.map(({ name, feeWei }) => ({ id: name, feeWei })),
    accounts: description.accounts.map(({ role, address }) => ({ role, address })),
    descriptionFile: descriptionPath ?? null,
  };
}
