/**
 * Fault switches of the built-in model, for tests of the service's failure paths. A fault is set for
 * the whole worker (configuration) or, when enabled, per prompt by a directive in the last user
 * message such as `#fault:fail-after-chunks=3`.
 */
export type GenerationFault =
  | { readonly kind: 'fail-before-first-chunk' }
  | { readonly kind: 'fail-after-chunks'; readonly chunks: number }
  | { readonly kind: 'stall-past-deadline' }
  | { readonly kind: 'restart-after-chunks'; readonly chunks: number }
  | { readonly kind: 'commit-mismatched-hash' };

export type GenerationFaultKind = GenerationFault['kind'];

const FAULTS_WITH_CHUNK_COUNT = new Set<GenerationFaultKind>(['fail-after-chunks', 'restart-after-chunks']);
const FAULT_KINDS = new Set<GenerationFaultKind>([
  'fail-before-first-chunk',
  'fail-after-chunks',
  'stall-past-deadline',
  'restart-after-chunks',
  'commit-mismatched-hash',
]);
const DEFAULT_CHUNK_COUNT = 2;

/** Parses `kind` or `kind=chunks`, e.g. `restart-after-chunks=3`; throws on an unknown fault. */
export function parseGenerationFault(spec: string): GenerationFault {
  const [rawKind = '', rawCount] = spec.trim().split('=', 2);
  const kind = rawKind as GenerationFaultKind;
  if (!FAULT_KINDS.has(kind)) throw new RangeError(`unknown model fault "${rawKind}"`);
  if (!FAULTS_WITH_CHUNK_COUNT.has(kind)) {
    if (rawCount !== undefined) throw new RangeError(`model fault "${kind}" takes no chunk count`);
    return { kind } as GenerationFault;
  }
  const chunks = rawCount === undefined ? DEFAULT_CHUNK_COUNT : Number(rawCount);
  if (!Number.isInteger(chunks) || chunks < 0) {
    throw new RangeError(`model fault "${kind}" needs a whole chunk count, got "${rawCount}"`);
  }
  return { kind, chunks } as GenerationFault;
}

const FAULT_DIRECTIVE = /#fault:([a-z-]+(?:=\d+)?)/;

/** The fault a prompt asks for with `#fault:<kind>[=<chunks>]`, if any and if it names a real fault. */
export function faultDirectiveIn(text: string): GenerationFault | undefined {
  const match = FAULT_DIRECTIVE.exec(text);
  if (!match?.[1]) return undefined;
  try {
    return parseGenerationFault(match[1]);
  } catch {
    return undefined;
  }
}
