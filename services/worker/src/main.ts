import { runMain } from '@svc/runtime';
import { workerModule } from './module.js';

// One reference worker, as a container runs it (the same as `svc-server --target worker`).
await runMain(workerModule);
