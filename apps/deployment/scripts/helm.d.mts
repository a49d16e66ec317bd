// Types of helm.mjs for the TypeScript that imports it (the cluster suite).
export class HelmUnavailable extends Error {}
/** The path of a working helm binary, extracting it first when the cache lacks it. */
export function ensureHelm(): string;
