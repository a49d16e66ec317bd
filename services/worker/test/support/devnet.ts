// Only worker-process.test.ts still imports this; the other suites call @svc/testkit's useDevnet
// with DEPLOYED_MODELS themselves. Goes when that test does too.
import { useDevnet as useTestkitDevnet, type Devnet, type DevnetOptions } from '@svc/testkit';
import { DEPLOYED_MODELS } from './models.js';

export { MODEL, OTHER_MODEL } from './models.js';

export function useDevnet(options: Omit<DevnetOptions, 'models'> = {}): () => Devnet {
  return useTestkitDevnet({ ...options, models: DEPLOYED_MODELS });
}
