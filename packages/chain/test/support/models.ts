import { parseEther } from 'ethers';

/** The model the test deployments configure (fee in wei). */
export const MODEL = { name: 'llama3.2:1b', feeWei: parseEther('0.001') };
