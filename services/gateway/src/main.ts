import { runMain } from '@svc/runtime';
import { gatewayModule } from './module.js';

// The gateway alone, as a container runs it (the same as `svc-server --target gateway`).
await runMain(gatewayModule);
