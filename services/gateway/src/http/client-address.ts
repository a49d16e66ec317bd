import type { Request } from 'express';
import ipaddr from 'ipaddr.js';

/** IPv6 clients are counted by their /64: one host usually holds a whole /64 and may pick any address in it. */
const IPV6_CLIENT_PREFIX_GROUPS = 4;

/**
 * The subject of per-address limits: the client's IPv4 address, or the /64 network of its IPv6 address
 * (`2001:db8:1:2::/64`). The address is express's `req.ip`, so it honours TRUST_PROXY. IPv4-mapped IPv6
 * addresses count as their IPv4 address.
 */
export function clientNetwork(req: Request): string {
  return networkOf(req.ip ?? req.socket.remoteAddress ?? 'unknown');
}

// Dotted-decimal IPv4 without leading zeros: what ipaddr would answer for it is the address itself.
const CANONICAL_IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

export function networkOf(address: string): string {
  // The common case, without parsing (every /v1 call of a known key names its network to the store).
  if (CANONICAL_IPV4.test(address)) return address;
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const groups = (parsed as ipaddr.IPv6).parts.slice(0, IPV6_CLIENT_PREFIX_GROUPS);
  const prefix = new ipaddr.IPv6([...groups, 0, 0, 0, 0]);
  return `${prefix.toString()}/64`;
}
