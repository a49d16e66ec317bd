import { AppError } from '@svc/platform';
import type { RequestHandler } from 'express';

const PAYMENT_SIGNATURE = 'payment-signature';
const SUPPORTED_X402_VERSION = 2;

function decodedPayload(header: string): unknown {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(header.trim())) return undefined;
  try {
    return JSON.parse(Buffer.from(header.trim(), 'base64').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Answers a call carrying `PAYMENT-SIGNATURE` on a server that takes no per-call payments. The protocol's
 * check order holds even here: a payload that does not decode is `invalid_payload`, a foreign x402 version
 * `invalid_x402_version`, and only then `unsupported_scheme`. All are 400s; the call is never run.
 */
export function refusePerCallPayments(): RequestHandler {
  return (req, _res, next) => {
    const header = req.get(PAYMENT_SIGNATURE);
    if (header === undefined) {
      next();
      return;
    }
    const payload = decodedPayload(header);
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload))
      throw new AppError('invalid_payload', {
        message: 'PAYMENT-SIGNATURE must be base64 of a JSON payment payload.',
      });
    const version = (payload as Record<string, unknown>).x402Version;
    if (version !== SUPPORTED_X402_VERSION)
      throw new AppError('invalid_x402_version', {
        message: `Unsupported x402 version ${JSON.stringify(version ?? null)}.`,
      });
    throw new AppError('unsupported_scheme', {
      message:
        'This server takes no per-call payments: send the call without PAYMENT-SIGNATURE, with an API key.',
    });
  };
}
