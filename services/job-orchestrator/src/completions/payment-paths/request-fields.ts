import { AppError } from '@svc/platform';

// What the gateway guarantees about a request's fields, checked again here: internal calls do not take the
// caller's word.

export function isAddress(value: string | undefined): value is string {
  return value !== undefined && /^0x[0-9a-fA-F]{40}$/.test(value);
}

export function isWei(value: string | undefined): value is string {
  return value !== undefined && /^\d{1,78}$/.test(value);
}

export function invalidRequest(message: string): AppError {
  return new AppError('invalid_request', { message });
}
