import { errorOfBody } from '@svc/api';
import { remedyOf } from './remedies.js';

/** The exit codes of `svc` (docs/cli.md). */
export const EXIT = {
  ok: 0,
  /** The network, the server (5xx) or the chain failed. */
  failed: 1,
  /** Bad arguments or options. */
  usage: 2,
  /** Credentials: not signed in, the sign-in expired, or the API key was refused (401). */
  credentials: 3,
  /** A 402: the call must be paid first. */
  paymentNeeded: 4,
  /** Any other refusal (400, 404, 409, 429). */
  refused: 5,
  /** The confirmation prompt was declined. */
  declined: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A failure `svc` reports as one line (or one JSON object with --json) before exiting with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    readonly details: {
      readonly status?: number;
      readonly code?: string | null;
      /** What to do, in docs/api.md's words. */
      readonly remedy?: string;
      /** The `svc` command that does it. */
      readonly command?: string;
      /** Extra fields of the API's error (`accepts`, `spend_cap_wei`, `retry_after`). */
      readonly fields?: Readonly<Record<string, unknown>>;
    } = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'CliError';
  }
}

export function usageError(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

function exitCodeOfStatus(status: number): ExitCode {
  if (status === 401) return EXIT.credentials;
  if (status === 402) return EXIT.paymentNeeded;
  if (status >= 400 && status < 500) return EXIT.refused;
  return EXIT.failed;
}

/**
 * The error an API answer carries, in either documented shape: `/v1`'s OpenAI shape
 * `{ error: { message, code, … } }` or `/api`'s `{ error: "<code>", message }`.
 */
export function apiError(status: number, body: unknown, retryAfter?: string | null): CliError {
  const error = errorOfBody(body);
  const code = error?.code ?? null;
  const message = error?.message ?? `the server answered ${status}`;
  let fields: Readonly<Record<string, unknown>> = error?.fields ?? {};
  // Seconds, as the service sends it (an HTTP date is left out rather than misread).
  if (retryAfter && /^[0-9]+$/.test(retryAfter)) fields = { ...fields, retry_after: Number(retryAfter) };
  const remedy =
    remedyOf(code, fields) ??
    (status >= 500
      ? { remedy: 'Retry with backoff.' }
      : status === 400
        ? { remedy: 'Fix the request.' }
        : {});
  return new CliError(message, exitCodeOfStatus(status), { status, code, ...remedy, fields });
}
