import { describe, expect, it } from '@jest/globals';
import { Writable } from 'node:stream';
import { createLogger, scrubSecrets, withRequestContext } from '../src/index.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger({ service: 'test', destination }) };
}

const apiKey = 'svc_3kTz9QmV8xYb2LpW4nRc7HdF6gJs1aEo5uKi0tNy';
const jwt = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiIweDEyMyJ9.c2lnbmF0dXJlLWJ5dGVz';

describe('logger', () => {
  it('writes structured JSON with the service and the request id of the current context', () => {
    const { lines, logger } = capture();
    withRequestContext({ requestId: 'req-42' }, () => logger.info({ route: '/v1/models' }, 'served'));
    logger.info('outside');
    expect(lines[0]).toMatchObject({
      level: 'info',
      service: 'test',
      requestId: 'req-42',
      route: '/v1/models',
      msg: 'served',
    });
    expect(lines[1]?.requestId).toBeUndefined();
  });

  it('redacts keys, tokens, signatures, prompts and auth headers', () => {
    const { lines, logger } = capture();
    logger.info(
      {
        headers: { authorization: `Bearer ${apiKey}`, 'payment-signature': 'eyJ4NDAyVmVyc2lvbiI6Mn0=' },
        key: apiKey,
        body: { messages: [{ role: 'user', content: 'my secret prompt' }], token: jwt, signature: '0xabc' },
      },
      'request',
    );
    const text = JSON.stringify(lines[0]);
    for (const secret of [apiKey, jwt, 'my secret prompt', '0xabc', 'eyJ4NDAyVmVyc2lvbiI6Mn0='])
      expect(text).not.toContain(secret);
    expect(text).toContain('[REDACTED]');
  });

  it('scrubs secrets quoted in messages and error texts', () => {
    const { lines, logger } = capture();
    logger.warn(`rejected key ${apiKey}`);
    logger.error({ err: new Error(`bad token ${jwt} from Bearer abc.def`) }, 'failed');
    const text = JSON.stringify(lines);
    expect(text).not.toContain(apiKey);
    expect(text).not.toContain(jwt);
    expect(text).not.toContain('abc.def');
    expect(text).toContain('svc_[REDACTED]');
  });

  it('leaves ordinary text alone', () => {
    expect(scrubSecrets('key prefix svc_ab12 listed')).toBe('key prefix svc_ab12 listed');
  });
});
