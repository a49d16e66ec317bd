import type { TLSSocket } from 'node:tls';
import type { Request, RequestHandler } from 'express';

/**
 * Headers every response carries. The gateway serves JSON and event streams, never HTML, so the policy
 * allows nothing at all: a response a browser is tricked into rendering can run nothing, load nothing and
 * be framed by no one.
 */
const EVERY_RESPONSE: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

/** One year; subdomains are left to the operator's own policy (they may not all be served over TLS). */
const STRICT_TRANSPORT_SECURITY = 'max-age=31536000';

/**
 * Sets the security headers on every response, and HSTS on those to requests that came over TLS
 * (`req.secure`: the connection itself, or X-Forwarded-Proto from a proxy TRUST_PROXY names). HSTS over
 * plain HTTP is ignored by browsers and would only mislead.
 */
export function securityHeaders(): RequestHandler {
  return (req, res, next) => {
    for (const [name, value] of Object.entries(EVERY_RESPONSE)) res.setHeader(name, value);
    if (cameOverTls(req)) res.setHeader('strict-transport-security', STRICT_TRANSPORT_SECURITY);
    next();
  };
}

/**
 * `req.secure`, without its cost on the common request: with no X-Forwarded-Proto there is nothing for
 * TRUST_PROXY to decide, and express answers whether the connection itself is TLS; only a request that
 * carries the header needs express to weigh it against the proxy it came from.
 */
function cameOverTls(req: Request): boolean {
  if (req.headers['x-forwarded-proto'] === undefined) return (req.socket as TLSSocket).encrypted === true;
  return req.secure;
}
