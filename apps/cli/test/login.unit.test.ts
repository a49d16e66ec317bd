import { describe, expect, it } from '@jest/globals';
import { SiweMessage } from 'siwe';
import { Wallet } from 'ethers';
import { checkChallenge } from '../src/commands/login.js';
import { CliError } from '../src/errors.js';

// `svc login` signs a challenge only when it signs in to the base URL it was given, for its own wallet:
// a server at another address must not get a signature it can relay to the real service.
describe('checkChallenge', () => {
  const wallet = Wallet.createRandom();
  const challenge = (fields: Partial<{ domain: string; uri: string; address: string }> = {}) =>
    new SiweMessage({
      domain: 'localhost:8080',
      uri: 'http://localhost:8080',
      address: wallet.address,
      version: '1',
      chainId: 31337,
      nonce: 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6',
      issuedAt: new Date().toISOString(),
      statement: 'Sign in to svc.',
      ...fields,
    }).prepareMessage();
  const refusal = (message: string, baseUrl = 'http://localhost:8080') => {
    try {
      checkChallenge(message, baseUrl, wallet.address);
    } catch (error) {
      expect(error).toBeInstanceOf(CliError);
      return (error as CliError).message;
    }
    return undefined;
  };

  it('accepts the service its base URL names, for this wallet', () => {
    expect(refusal(challenge())).toBeUndefined();
    expect(refusal(challenge(), 'http://localhost:8080/')).toBeUndefined();
  });

  it('refuses a challenge for another domain, another URI origin or another wallet, and a non-SIWE text', () => {
    expect(refusal(challenge({ domain: 'svc.example.com', uri: 'https://svc.example.com' }))).toMatch(
      /^not signing: the challenge signs in to svc\.example\.com \(https:\/\/svc\.example\.com\), not to http:\/\/localhost:8080$/,
    );
    expect(refusal(challenge({ uri: 'http://localhost:9999' }))).toMatch(/not to http:\/\/localhost:8080/);
    expect(refusal(challenge(), 'http://127.0.0.1:8080')).toMatch(/signs in to localhost:8080/);
    expect(refusal(challenge({ address: Wallet.createRandom().address }))).toMatch(
      /^not signing: the challenge is for 0x/,
    );
    expect(refusal('Please sign this to continue')).toBe(
      'not signing: the challenge is not a Sign-In with Ethereum message',
    );
  });
});
