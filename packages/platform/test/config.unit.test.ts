import { describe, expect, it } from '@jest/globals';
import { ConfigError, configReference, env, loadConfig, parseDurationMs } from '../src/index.js';

const shape = {
  PORT: env.port({ doc: 'HTTP port', default: 8080 }),
  REDIS_URL: env.url({ doc: 'Redis; unset: embedded store', protocols: ['redis', 'rediss'] }),
  DATABASE_URL: env.url({ doc: 'PostgreSQL', required: true, secret: true }),
  CLAIM_WAIT: env.durationMs({ doc: 'claim wait', default: '30s' }),
  MAX_BLOB_FEE_WEI: env.wei({ doc: 'max blob fee', default: 10n ** 9n }),
  COMPLETIONS_ENABLED: env.bool({ doc: 'completions on', default: true }),
  MODELS: env.list({ doc: 'models', default: ['a', 'b'] }),
  LOG_LEVEL: env.oneOf({ doc: 'log level', values: ['debug', 'info', 'warn'] as const, default: 'info' }),
};

describe('loadConfig', () => {
  it('applies defaults and parses typed values', () => {
    const config = loadConfig(shape, {
      DATABASE_URL: 'postgresql://u@h/db',
      MAX_BLOB_FEE_WEI: '123456789012345678901234567890',
    });
    expect(config).toEqual({
      PORT: 8080,
      REDIS_URL: undefined,
      DATABASE_URL: 'postgresql://u@h/db',
      CLAIM_WAIT: 30_000,
      MAX_BLOB_FEE_WEI: 123456789012345678901234567890n,
      COMPLETIONS_ENABLED: true,
      MODELS: ['a', 'b'],
      LOG_LEVEL: 'info',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reports every problem at once and never echoes a secret', () => {
    let caught: unknown;
    try {
      loadConfig(shape, {
        PORT: '70000',
        REDIS_URL: 'http://x',
        DATABASE_URL: 'not a url with password hunter2',
        CLAIM_WAIT: 'soon',
        MAX_BLOB_FEE_WEI: '-1',
        COMPLETIONS_ENABLED: 'maybe',
        LOG_LEVEL: 'loud',
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const problems = (caught as ConfigError).problems;
    expect(problems).toHaveLength(7);
    expect(problems.join('\n')).toContain('PORT must be an integer from 0 to 65535 (got "70000")');
    expect(problems.join('\n')).toContain('REDIS_URL must be a URL with scheme redis or rediss');
    expect(problems.join('\n')).toContain('LOG_LEVEL must be one of debug, info, warn');
    expect((caught as Error).message).not.toContain('hunter2');
  });

  it('requires required fields', () => {
    expect(() => loadConfig(shape, {})).toThrow('DATABASE_URL is required');
  });

  it('refuses a string shorter than its minimum length without echoing it', () => {
    const peppered = { PEPPER: env.string({ doc: 'pepper', secret: true, minLength: 32 }) };
    expect(() => loadConfig(peppered, { PEPPER: 'short-secret' })).toThrow('at least 32 characters');
    expect(() => loadConfig(peppered, { PEPPER: 'short-secret' })).not.toThrow('short-secret');
    expect(loadConfig(peppered, { PEPPER: 'p'.repeat(32) }).PEPPER).toBe('p'.repeat(32));
  });

  it('takes a Redis URL naming one server or a cluster, and says what a bad one lacks', () => {
    const redis = { REDIS_URL: env.redisUrl({ doc: 'Redis', secret: true }) };
    for (const url of [
      'redis://127.0.0.1:6379',
      'rediss://user:pw@redis.example:6380/2',
      'redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003',
      'rediss+cluster://user:pw@a.example:6379,b.example:6379',
    ])
      expect(loadConfig(redis, { REDIS_URL: url }).REDIS_URL).toBe(url);
    expect(loadConfig(redis, {}).REDIS_URL).toBeUndefined();
    expect(() => loadConfig(redis, { REDIS_URL: 'http://x' })).toThrow(
      'REDIS_URL must be a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL',
    );
    expect(() => loadConfig(redis, { REDIS_URL: 'redis+cluster://:hunter2@h:7001/3' })).toThrow(
      'REDIS_URL must be redis+cluster://',
    );
    expect(() => loadConfig(redis, { REDIS_URL: 'redis+cluster://:hunter2@h:7001/3' })).not.toThrow(
      'hunter2',
    );
  });

  it('parses durations', () => {
    expect(parseDurationMs('250ms')).toBe(250);
    expect(parseDurationMs('5m')).toBe(300_000);
    expect(parseDurationMs('1500')).toBe(1500);
    expect(() => parseDurationMs('5 minutes')).toThrow();
  });

  it('renders a configuration reference', () => {
    const reference = configReference(shape);
    expect(reference).toContain('| `PORT` | `8080` | HTTP port |');
    expect(reference).toContain('| `DATABASE_URL` | required | PostgreSQL |');
    expect(reference).toContain('| `REDIS_URL` | unset | Redis; unset: embedded store |');
    expect(reference).toContain('| `CLAIM_WAIT` | `30s` | claim wait |');
  });
});
