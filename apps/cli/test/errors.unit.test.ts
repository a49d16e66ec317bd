import { describe, expect, it } from '@jest/globals';
import { CliError, EXIT, apiError } from '../src/errors.js';
import { Output } from '../src/output.js';
import { Capture } from './support/capture.js';

describe('apiError', () => {
  it("reads /v1's OpenAI shape: message, code, and the extra fields without type and param", () => {
    const error = apiError(401, {
      error: {
        message: 'Incorrect API key provided',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    });
    expect(error).toBeInstanceOf(CliError);
    expect(error.message).toBe('Incorrect API key provided');
    expect(error.exitCode).toBe(EXIT.credentials);
    expect(error.details).toEqual({
      status: 401,
      code: 'invalid_api_key',
      remedy: 'Send a valid key; on a call paid per call send no Authorization header.',
      command: 'svc keys create --save',
      fields: {},
    });
  });

  it("keeps a 402's accepts and fills its minimum into svc authorize", () => {
    const accepts = [{ instruction: { minimum_value_wei: '2000' }, to: '0x1' }];
    const error = apiError(402, {
      error: {
        message: 'not authorized',
        type: 'payment_required',
        param: null,
        code: 'delegate_not_authorized',
        accepts,
      },
    });
    expect(error.exitCode).toBe(EXIT.paymentNeeded);
    expect(error.details.fields).toEqual({ accepts });
    expect(error.details.command).toBe('svc authorize 2000 (or more)');
    expect(error.details.remedy).toBe('Send the transaction in error.accepts.');

    const capped = apiError(402, {
      error: {
        message: 'cap reached',
        type: 'payment_required',
        code: 'spend_cap_exceeded',
        spend_cap_wei: '5',
      },
    });
    expect(capped.details.fields).toEqual({ spend_cap_wei: '5' });
    expect(capped.details.command).toBe('svc keys cap <id> <amount|none>');
  });

  it("reads /api's shape: the code in error, the text in message", () => {
    const error = apiError(409, { error: 'api_key_active', message: 'revoke the key before deleting it' });
    expect(error.message).toBe('revoke the key before deleting it');
    expect(error.exitCode).toBe(EXIT.refused);
    expect(error.details).toEqual({
      status: 409,
      code: 'api_key_active',
      remedy: 'Revoke it first.',
      command: 'svc keys revoke <id>',
      fields: {},
    });
    expect(apiError(401, { error: 'unauthorized', message: 'token expired' }).exitCode).toBe(
      EXIT.credentials,
    );
  });

  it('adds retry-after as a number', () => {
    const error = apiError(429, { error: 'rate_limit_exceeded', message: 'slow down' }, '7');
    expect(error.exitCode).toBe(EXIT.refused);
    expect(error.details.fields).toEqual({ retry_after: 7 });
    expect(error.details.remedy).toBe('Wait 7 seconds (retry-after).');
    expect(apiError(429, { error: 'rate_limit_exceeded' }, null).details.fields).toEqual({});
  });

  it('falls back to the status: its message, and the remedy of a 5xx or a 400 with no code', () => {
    const noBody = apiError(500, undefined);
    expect(noBody.message).toBe('the server answered 500');
    expect(noBody.exitCode).toBe(EXIT.failed);
    expect(noBody.details).toEqual({ status: 500, code: null, remedy: 'Retry with backoff.', fields: {} });

    const noCode = apiError(400, {
      error: {
        message: 'messages is required',
        type: 'invalid_request_error',
        param: 'messages',
        code: null,
      },
    });
    expect(noCode.message).toBe('messages is required');
    expect(noCode.exitCode).toBe(EXIT.refused);
    expect(noCode.details).toEqual({ status: 400, code: null, remedy: 'Fix the request.', fields: {} });

    for (const body of ['oops', [1, 2], null, { error: 42 }, { message: 'no error field' }])
      expect(apiError(502, body).message).toBe('the server answered 502');
  });

  it('has no remedy for an unknown code of a refusal', () => {
    const error = apiError(404, { error: 'not_found', message: 'Not found' });
    expect(error.exitCode).toBe(EXIT.refused);
    expect(error.details).toEqual({ status: 404, code: 'not_found', fields: {} });
  });

  it('keeps the documented remedy of a known code over the fallback', () => {
    expect(apiError(502, { error: { message: 'worker died', code: 'job_failed' } }).details.remedy).toBe(
      'Retry.',
    );
    expect(apiError(503, { error: { message: 'none', code: 'no_worker_available' } }).details).toMatchObject({
      remedy: 'Retry shortly.',
    });
    expect(apiError(503, { error: { message: 'none', code: 'no_worker_available' } }).exitCode).toBe(
      EXIT.failed,
    );
  });
});

function outputs(json: boolean, tty = false) {
  const stdout = new Capture();
  const stderr = new Capture(tty);
  return { output: new Output(json, stdout, stderr), stdout, stderr };
}

describe('Output', () => {
  it('prints results for a person, and notes on stderr', () => {
    const { output, stdout, stderr } = outputs(false);
    output.result({ ignored: true }, () => 'Key k1 revoked.');
    output.result({}, () => '');
    output.write('streamed ');
    output.write('text');
    output.note('a note');
    expect(stdout.text).toBe('Key k1 revoked.\nstreamed text');
    expect(stderr.text).toBe('a note\n');
  });

  it('with --json prints the result as one JSON document, bigints as strings, and nothing else', () => {
    const { output, stdout, stderr } = outputs(true, true);
    output.write('streamed');
    output.note('a note');
    output.result({ id: 'k1', spentWei: 10n ** 20n }, () => {
      throw new Error('no human rendering with --json');
    });
    expect(JSON.parse(stdout.text)).toEqual({ id: 'k1', spentWei: '100000000000000000000' });
    expect(stdout.text.endsWith('}\n')).toBe(true);
    expect(stderr.text).toBe('');
  });

  it('shows progress only to a person at a terminal', async () => {
    expect((await outputs(false, true).output.progress('working')).isSilent).toBe(false);
    expect((await outputs(false, false).output.progress('working')).isSilent).toBe(true);
    expect((await outputs(true, true).output.progress('working')).isSilent).toBe(true);
    const { output, stdout, stderr } = outputs(false, false);
    (await output.progress('working')).start().succeed('done');
    expect(stdout.text + stderr.text).toBe('');
  });

  describe('an error for a person', () => {
    const lineOf = (error: CliError) => {
      const { output, stdout, stderr } = outputs(false);
      output.error(error);
      expect(stdout.text).toBe('');
      return stderr.text;
    };

    it('is one line: svc, the code, the message, then the command to run', () => {
      const error = apiError(401, {
        error: { message: 'Incorrect API key provided', code: 'invalid_api_key' },
      });
      expect(lineOf(error)).toBe(
        'svc: invalid_api_key: Incorrect API key provided. Run: svc keys create --save\n',
      );
      const payment = apiError(402, {
        error: {
          message: 'Authorize first.',
          code: 'delegate_not_authorized',
          accepts: [{ instruction: { minimum_value_wei: '9' } }],
        },
      });
      expect(lineOf(payment)).toBe(
        'svc: delegate_not_authorized: Authorize first. Run: svc authorize 9 (or more)\n',
      );
    });

    it('ends with the remedy when there is no command and the message does not say it already', () => {
      expect(lineOf(apiError(502, { error: { message: 'the worker failed', code: 'job_failed' } }))).toBe(
        'svc: job_failed: the worker failed. Retry.\n',
      );
      expect(
        lineOf(
          apiError(503, { error: { message: 'No worker; retry shortly', code: 'no_worker_available' } }),
        ),
      ).toBe('svc: no_worker_available: No worker; retry shortly.\n');
    });

    it('has no code part without a code, and no ending without a remedy', () => {
      expect(lineOf(new CliError('cannot reach http://x', EXIT.failed))).toBe(
        'svc: cannot reach http://x.\n',
      );
      expect(lineOf(apiError(500, undefined))).toBe('svc: the server answered 500. Retry with backoff.\n');
      expect(lineOf(apiError(404, { error: 'not_found', message: 'Not found!' }))).toBe(
        'svc: not_found: Not found!\n',
      );
    });
  });

  it('with --json prints an error as one JSON document on stdout, with the extra fields', () => {
    const { output, stdout, stderr } = outputs(true);
    output.error(
      apiError(402, { error: { message: 'pay', code: 'spend_cap_exceeded', spend_cap_wei: '5' } }, '3'),
    );
    expect(stderr.text).toBe('');
    expect(JSON.parse(stdout.text)).toEqual({
      error: {
        message: 'pay',
        status: 402,
        code: 'spend_cap_exceeded',
        remedy: 'Raise or remove the cap (PATCH /api/api-keys/{id}).',
        command: 'svc keys cap <id> <amount|none>',
        spend_cap_wei: '5',
        retry_after: 3,
      },
    });
  });
});
