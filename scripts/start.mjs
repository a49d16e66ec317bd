// `npm start`: the launcher of the all-in-one mode, from TypeScript sources (no build step):
// apps/server/src/launcher/launch.ts.
import { register } from 'tsx/esm/api';

register();
await import('../apps/server/src/launcher/launch.ts');
