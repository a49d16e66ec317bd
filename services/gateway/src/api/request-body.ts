import { AppError } from '@svc/platform';
import type { Request } from 'express';

// Checks of the JSON shape of `/api` bodies. What a value means (a valid address, a cap within uint256, a
// name of at most 64 characters) is the key-service's to check; here only types are, with the field named,
// plus what the gRPC hop would silently alter (lone surrogates, a leading BOM) before the key-service sees it.

export type JsonObject = Readonly<Record<string, unknown>>;

/** The parsed body; a request without one reads as `{}`. */
export function jsonObjectBody(req: Request): JsonObject {
  const body: unknown = req.body;
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new AppError('invalid_request', { message: 'The body must be a JSON object.' });
  return body as JsonObject;
}

// A JSON string may hold a lone surrogate (`"\ud800"`), which is no text: gRPC would silently turn it into U+FFFD.
const LONE_SURROGATE = /\p{Cs}/u;

function stringValue(value: unknown, field: string): string {
  if (typeof value !== 'string')
    throw new AppError('invalid_request', { message: `${field} must be a string.` });
  if (LONE_SURROGATE.test(value))
    throw new AppError('invalid_request', { message: `${field} must be valid Unicode text.` });
  return value;
}

export function requiredString(body: JsonObject, field: string): string {
  const value = body[field];
  if (value === undefined || value === null)
    throw new AppError('invalid_request', { message: `${field} is required.` });
  return stringValue(value, field);
}

/** An optional string field; null reads as absent. */
export function optionalString(body: JsonObject, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  return stringValue(value, field);
}

/** A spend cap as sent: a decimal string of wei, or null for no cap. */
export type SpendCapInput = { readonly kind: 'cap'; readonly decimal: string } | { readonly kind: 'none' };

const ASCII_DIGITS = /^[0-9]+$/;
const CAP_TYPE_MESSAGE = 'spendCapWei must be a decimal string of wei (e.g. "1000000000000000000") or null.';

function spendCapValue(value: unknown): SpendCapInput {
  if (value === null) return { kind: 'none' };
  // Numbers are refused, not converted: wei amounts routinely exceed what a JSON number holds exactly.
  if (typeof value !== 'string') throw new AppError('invalid_request', { message: CAP_TYPE_MESSAGE });
  // The shape is checked here too, not only by the key-service: gRPC's UTF-8 decoding drops a leading BOM.
  if (!ASCII_DIGITS.test(value)) throw new AppError('invalid_request', { message: CAP_TYPE_MESSAGE });
  return { kind: 'cap', decimal: value };
}

/** `spendCapWei` of a mint: absent or null is no cap. */
export function optionalSpendCap(body: JsonObject): SpendCapInput {
  return body.spendCapWei === undefined ? { kind: 'none' } : spendCapValue(body.spendCapWei);
}

/** `spendCapWei` of a PATCH: it must be present, since null (remove the cap) is a meaningful value. */
export function requiredSpendCap(body: JsonObject): SpendCapInput {
  if (!Object.hasOwn(body, 'spendCapWei') || body.spendCapWei === undefined)
    throw new AppError('invalid_request', {
      message: 'spendCapWei is required: a decimal string of wei, or null to remove the cap.',
    });
  return spendCapValue(body.spendCapWei);
}
