import { parseEther } from 'ethers';

/** The models the test deployments configure (fees in wei). */
export const MODEL = { name: 'svc-deterministic:1', feeWei: parseEther('0.001') };
export const OTHER_MODEL = { name: 'other-model:7b', feeWei: parseEther('0.002') };

/** What every suite's devnet deploys. */
export const DEPLOYED_MODELS = [MODEL, OTHER_MODEL];
