import { packageJestConfig } from '../../jest.preset.js';

// One stack at a time: each file starts its own `npm start` (a devnet, every service, two workers), and
// two at once on a small machine would race the chain's claim windows.
export default packageJestConfig(import.meta.url, { maxWorkers: 1 });
