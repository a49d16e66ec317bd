/** Why the worker gave up a job at once (failJob) instead of serving it. */
export type JobRefusalReason =
  | 'deadline_too_close'
  | 'no_session_key'
  | 'blob_unavailable'
  | 'malformed_blob'
  | 'undecryptable_prompt'
  | 'wrong_model'
  | 'model_failed'
  | 'no_free_slot'
  | 'draining'
  | 'internal_error';

export class JobRefusedError extends Error {
  override readonly name = 'JobRefusedError';

  constructor(
    readonly reason: JobRefusalReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}
