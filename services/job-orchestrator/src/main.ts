import { runMain } from '@svc/runtime';
import { jobOrchestratorModule } from './module.js';

// The job-orchestrator alone, as a container runs it (the same as `svc-server --target job-orchestrator`).
await runMain(jobOrchestratorModule);
