import { runMain } from '@svc/runtime';
import { keyServiceModule } from './module.js';

// The key-service alone, as a container runs it (the same as `svc-server --target key-service`).
await runMain(keyServiceModule);
