import { parseEther } from 'ethers';

/** The models the test deployments configure (fees in wei). */
export const MODEL = { name: 'svc-deterministic:1', feeWei: parseEther('0.001') };

export const DEPLOYED_MODELS = [MODEL];
