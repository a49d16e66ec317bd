import { runMain } from '@svc/runtime';
import { jobOrchestratorModule } from './module.js';

// The job-orchestrator alone, as a container runs it.
await runMain({ name: 'job-orchestrator', modules: [jobOrchestratorModule] });
