// Prints the key-service configuration reference (the table in docs/key-service.md) from the config shape.
import { configReference } from '@svc/platform';
import { keyServiceConfigShape } from '../src/config.js';

process.stdout.write(`${configReference(keyServiceConfigShape)}\n`);
