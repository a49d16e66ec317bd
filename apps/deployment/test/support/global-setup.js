// Extracts helm before any test file runs (scripts/helm.mjs), so a missing or broken binary fails the
// run at once, loudly, instead of each chart test on its own.
import { ensureHelm } from '../../scripts/helm.mjs';

export default function globalSetup() {
  process.env.SVC_HELM_BIN = ensureHelm();
}
