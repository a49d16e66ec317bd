import { describe, expect, it } from '@jest/globals';
import { networkOf } from '../src/http/client-address.js';

describe('the network a client is counted by', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['10.20.30.40', '10.20.30.40'],
    ['255.255.255.255', '255.255.255.255'],
    ['0.0.0.0', '0.0.0.0'],
    // Other spellings of an IPv4 address count as the address they spell.
    ['010.1.2.3', '8.1.2.3'],
    ['1.2.3.04', '1.2.3.4'],
    ['0x7f.0.0.1', '127.0.0.1'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    // IPv6 clients by their /64.
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::', '2001:db8:1:2::/64'],
    // What is not an address is counted as itself.
    ['256.1.1.1', '256.1.1.1'],
    ['1.2.3', '1.2.3'],
    ['unknown', 'unknown'],
  ])('counts %s as %s', (address, network) => {
    expect(networkOf(address)).toBe(network);
  });
});
