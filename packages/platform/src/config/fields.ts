import { z } from 'zod';
import { checkRedisUrl } from '../store/redis/redis-url.js';

/** One environment variable: how to parse it, its default, and its line in the configuration reference. */
export interface ConfigField<T> {
  readonly parse: (raw: string | undefined) => T;
  readonly doc: string;
  /** The default as written in the reference; undefined for a required or optional-without-default field. */
  readonly defaultText: string | undefined;
  readonly required: boolean;
  /** Secrets are never echoed back in error messages. */
  readonly secret: boolean;
}

class InvalidValue extends Error {}

function field<T>(
  doc: string,
  convert: (raw: string) => T,
  options: { default?: T; defaultText?: string; optional?: boolean; secret?: boolean },
): ConfigField<T> {
  const hasDefault = options.default !== undefined;
  return {
    doc,
    defaultText: options.defaultText ?? (hasDefault ? String(options.default) : undefined),
    required: !hasDefault && !options.optional,
    secret: options.secret ?? false,
    parse: (raw) => {
      const value = raw?.trim();
      if (value === undefined || value === '') {
        if (hasDefault) return options.default as T;
        if (options.optional) return undefined as T;
        throw new InvalidValue('is required');
      }
      return convert(value);
    },
  };
}

function zodConvert<T>(schema: z.ZodType<T>, expectation: string): (raw: string) => T {
  return (raw) => {
    const result = schema.safeParse(raw);
    if (!result.success) throw new InvalidValue(`must be ${expectation}`);
    return result.data;
  };
}

const integer = (min: number, max: number) =>
  zodConvert(z.coerce.number().int().min(min).max(max), `an integer from ${min} to ${max}`);

const DURATION = /^(\d+)(ms|s|m|h)?$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Parses `250ms`, `30s`, `5m`, `1h` or a bare number of milliseconds. */
export function parseDurationMs(raw: string): number {
  const match = DURATION.exec(raw.trim());
  if (!match) throw new InvalidValue('must be a duration such as 250ms, 30s, 5m, 1h');
  return Number(match[1]) * UNIT_MS[(match[2] ?? 'ms') as keyof typeof UNIT_MS];
}

// `defaultText` is how the reference shows a default that depends on the machine (a path, say).
type Common<T> = { doc: string; default?: T; defaultText?: string; secret?: boolean };

/** Builders for the kinds of variables services read. */
export const env = {
  string: (o: Common<string> & { optional?: boolean; minLength?: number }) =>
    field<string>(
      o.doc,
      (raw) => {
        if (o.minLength !== undefined && raw.length < o.minLength)
          throw new InvalidValue(`must be at least ${o.minLength} characters`);
        return raw;
      },
      o,
    ),
  optionalString: (o: { doc: string; secret?: boolean }) =>
    field<string | undefined>(o.doc, (raw) => raw, { ...o, optional: true }),
  int: (o: Common<number> & { min?: number; max?: number }) =>
    field(o.doc, integer(o.min ?? Number.MIN_SAFE_INTEGER, o.max ?? Number.MAX_SAFE_INTEGER), o),
  optionalInt: (o: { doc: string; min?: number; max?: number }) =>
    field<number | undefined>(
      o.doc,
      integer(o.min ?? Number.MIN_SAFE_INTEGER, o.max ?? Number.MAX_SAFE_INTEGER),
      {
        optional: true,
      },
    ),
  port: (o: Common<number>) => field(o.doc, integer(0, 65_535), o),
  ratio: (o: Common<number>) =>
    field(o.doc, zodConvert(z.coerce.number().min(0).max(1), 'a number from 0 to 1'), o),
  bool: (o: Common<boolean>) =>
    field(
      o.doc,
      (raw) => {
        const lowered = raw.toLowerCase();
        if (['true', '1', 'yes', 'on'].includes(lowered)) return true;
        if (['false', '0', 'no', 'off'].includes(lowered)) return false;
        throw new InvalidValue('must be true or false');
      },
      o,
    ),
  /** A URL; optional unless a default is given, since an unset URL selects the embedded implementation. */
  url: (o: { doc: string; default?: string; protocols?: string[]; required?: boolean; secret?: boolean }) =>
    field<string | undefined>(
      o.doc,
      (raw) => {
        let url: URL;
        try {
          url = new URL(raw);
        } catch {
          throw new InvalidValue('must be a URL');
        }
        if (o.protocols && !o.protocols.includes(url.protocol.replace(/:$/, '')))
          throw new InvalidValue(`must be a URL with scheme ${o.protocols.join(' or ')}`);
        return raw;
      },
      { default: o.default, optional: !o.required, secret: o.secret },
    ),
  /**
   * A Redis URL: `redis://` or `rediss://` for one server, `redis+cluster://host:port,host:port` (or
   * `rediss+cluster://`) for a Redis Cluster; optional, since an unset URL selects the embedded store.
   */
  redisUrl: (o: { doc: string; secret?: boolean }) =>
    field<string | undefined>(
      o.doc,
      (raw) => {
        try {
          checkRedisUrl(raw);
        } catch (error) {
          throw new InvalidValue((error as Error).message);
        }
        return raw;
      },
      { optional: true, secret: o.secret },
    ),
  durationMs: (o: { doc: string; default?: string }) =>
    field<number>(o.doc, parseDurationMs, {
      default: o.default === undefined ? undefined : parseDurationMs(o.default),
      defaultText: o.default,
    }),
  wei: (o: { doc: string; default?: bigint; optional?: boolean }) =>
    field<bigint>(
      o.doc,
      (raw) => {
        if (!/^\d{1,78}$/.test(raw)) throw new InvalidValue('must be a non-negative whole number of wei');
        return BigInt(raw);
      },
      o,
    ),
  list: (o: { doc: string; default?: string[]; secret?: boolean }) =>
    field<string[]>(
      o.doc,
      (raw) =>
        raw
          .split(',')
          .map((item) => item.trim())
          .filter(Boolean),
      { default: o.default, defaultText: o.default?.join(','), secret: o.secret },
    ),
  oneOf: <const V extends string>(o: { doc: string; values: readonly V[]; default?: V }) =>
    field<V>(
      o.doc,
      (raw) => {
        if (!(o.values as readonly string[]).includes(raw))
          throw new InvalidValue(`must be one of ${o.values.join(', ')}`);
        return raw as V;
      },
      o,
    ),
};

export { InvalidValue };
