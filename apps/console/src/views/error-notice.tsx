import { describeFailure } from '../api/api-error.js';

/** A failure as the console shows every one: its code, what happened, and what to do about it. */
export function ErrorNotice({ error, title }: { error: unknown; title?: string }) {
  if (error === undefined) return null;
  const { code, message, remedy } = describeFailure(error);
  return (
    <div class="notice notice-error" role="alert">
      <p class="notice-title">
        {title ?? 'Something went wrong'}
        {code ? (
          <>
            {' '}
            <code class="error-code">{code}</code>
          </>
        ) : null}
      </p>
      <p>{message}</p>
      {remedy ? (
        <p class="remedy">
          <strong>What to do:</strong> {remedy}
        </p>
      ) : null}
    </div>
  );
}
