// Helpers for test suites only; product code never imports this package. Of the workspace packages
// it depends on @svc/anvil and @svc/contracts alone, so every other package's suite may use it.
export { waitFor, waitUntil, type WaitOptions } from './wait.js';
export { useDevnet } from './devnet.js';
export {
  startTestDevnet,
  type Devnet,
  type DevnetConnection,
  type DevnetOptions,
  type RunningDevnet,
} from './test-devnet.js';
export {
  createTestDatabase,
  TEST_DATABASE_URL,
  type TestDatabase,
  type TestDatabaseOptions,
} from './database.js';
export { freePort } from './ports.js';
export { sampleValue, scrape } from './metrics.js';
export { selfSignedCertificate } from './tls.js';
export { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
