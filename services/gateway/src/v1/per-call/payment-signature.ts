import { AppError } from '@svc/platform';
import { PAYMENT_SIGNATURE_HEADER, readPaymentSignature } from '@svc/x402';
import type { RequestHandler } from 'express';

/**
 * Answers a call carrying `PAYMENT-SIGNATURE` on a server that takes no per-call payments. The protocol's
 * check order holds even here: a payload that does not decode (or is malformed) is `invalid_payload`, a
 * foreign x402 version `invalid_x402_version`, and only then `unsupported_scheme`. All are 400s; the call
 * is never run.
 */
export function refusePerCallPayments(): RequestHandler {
  return (req, _res, next) => {
    const header = req.get(PAYMENT_SIGNATURE_HEADER);
    if (header === undefined) {
      next();
      return;
    }
    const read = readPaymentSignature(header);
    // Its own unsupported_scheme would name the scheme to pay with; here there is none.
    if (!read.ok && read.code !== 'unsupported_scheme')
      throw new AppError(read.code, { message: read.message });
    throw new AppError('unsupported_scheme', {
      message:
        'This server takes no per-call payments: send the call without PAYMENT-SIGNATURE, with an API key.',
    });
  };
}
