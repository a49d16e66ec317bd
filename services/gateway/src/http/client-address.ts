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

export function networkOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const groups = (parsed as ipaddr.IPv6).parts.slice(0, IPV6_CLIENT_PREFIX_GROUPS);
  const prefix = new ipaddr.IPv6([...groups, 0, 0, 0, 0]);
  return `${prefix.toString()}/64`;
}
