import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { currentRequestId } from './context.js';

export type { Logger };

/**
 * Field paths never written to logs. Keys, tokens, signatures and prompts must not reach logs: pino
 * replaces these values before serialization (one level of wildcard, as fast-redact allows).
 */
export const REDACTED_PATHS = [
  'authorization',
  'headers.authorization',
  'headers["payment-signature"]',
  'req.headers.authorization',
  'req.headers["payment-signature"]',
  'req.headers.cookie',
  '*.authorization',
  'key',
  '*.key',
  'apiKey',
  '*.apiKey',
  'token',
  '*.token',
  'signature',
  '*.signature',
  'paymentSignature',
  '*.paymentSignature',
  'privateKey',
  '*.privateKey',
  'password',
  '*.password',
  'messages',
  '*.messages',
  'prompt',
  '*.prompt',
  'replyKey',
  '*.replyKey',
] as const;

// Secrets that may appear inside free text (an error message quoting a header, say).
const SECRET_PATTERNS: Array<[RegExp, string]> = [
  [/svc_[A-Za-z0-9_-]{8,}/g, 'svc_[REDACTED]'],
  [/eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+/g, '[REDACTED_JWT]'],
  [/(bearer\s+)[^\s"']+/gi, '$1[REDACTED]'],
];

/** Removes API keys, JWTs and bearer credentials from a piece of free text. */
export function scrubSecrets(text: string): string {
  let scrubbed = text;
  for (const [pattern, replacement] of SECRET_PATTERNS) scrubbed = scrubbed.replace(pattern, replacement);
  return scrubbed;
}

export interface LoggerSettings {
  service: string;
  level?: string;
  /** For tests: where lines go instead of stdout. */
  destination?: DestinationStream;
}

/** A structured JSON logger for one service: request id from the current request context, secrets redacted. */
export function createLogger(settings: LoggerSettings): Logger {
  const options: LoggerOptions = {
    level: settings.level ?? 'info',
    base: { service: settings.service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACTED_PATHS], censor: '[REDACTED]' },
    formatters: { level: (label) => ({ level: label }) },
    mixin: () => {
      const requestId = currentRequestId();
      return requestId ? { requestId } : {};
    },
    serializers: {
      err: (error: unknown) => {
        const serialized = pino.stdSerializers.err(error as Error);
        if (typeof serialized.message === 'string') serialized.message = scrubSecrets(serialized.message);
        if (typeof serialized.stack === 'string') serialized.stack = scrubSecrets(serialized.stack);
        return serialized;
      },
    },
    hooks: {
      logMethod(args, method) {
        const scrubbed = args.map((arg) =>
          typeof arg === 'string' ? scrubSecrets(arg) : arg,
        ) as typeof args;
        method.apply(this, scrubbed);
      },
    },
  };
  return settings.destination ? pino(options, settings.destination) : pino(options);
}
