import { packageJestConfig } from '../../jest.preset.js';

export default packageJestConfig(import.meta.url);
