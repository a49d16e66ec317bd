import { AppError } from '@svc/platform';
import { verifyMessage } from 'ethers';
import { SiweMessage } from 'siwe';
import { parseWalletAddress, type WalletAddress } from '../wallet/wallet-address.js';
import type { SignInChallenges, SiweSettings } from './sign-in-challenges.js';

const SIGNATURE_SHAPE = /^0x[0-9a-fA-F]{130}$/;
/** An EIP-4361 message with our fields is a few hundred bytes; anything far larger is not one. */
const MAX_MESSAGE_LENGTH = 4096;

/**
 * Checks a signed EIP-4361 message the way docs/api.md describes: fields against configuration, times
 * with a small clock skew, the `personal_sign` signature of an externally owned account, and last the
 * nonce, spent only by a message that is otherwise fully valid.
 *
 * siwe parses the message (its ABNF parser); the checks are ours, because `SiweMessage.verify` compares
 * only the fields it is handed, has no clock skew, and writes to the console on a malformed signature.
 * Contract wallets (EIP-1271) are not supported: that needs a chain connection this service does not have.
 */
export class SignedMessageVerifier {
  constructor(
    private readonly challenges: SignInChallenges,
    private readonly settings: SiweSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async verify(message: string, signature: string): Promise<WalletAddress> {
    if (typeof message !== 'string' || message.length === 0 || message.length > MAX_MESSAGE_LENGTH) {
      throw new AppError('invalid_request', { message: 'message must be the signed EIP-4361 message.' });
    }
    if (!SIGNATURE_SHAPE.test(signature)) {
      throw new AppError('invalid_request', {
        message: 'signature must be "0x" followed by 130 hex digits (a 65-byte personal_sign signature).',
      });
    }
    const parsed = parse(message);
    const signer = this.checkFields(parsed);
    this.checkTimes(parsed);
    checkSignature(message, signature, signer);
    if (!(await this.challenges.consume(parsed.nonce, signer))) {
      throw refused('the nonce is unknown, expired, already used, or was issued for another address');
    }
    return signer;
  }

  private checkFields(parsed: SiweMessage): WalletAddress {
    const { domain, uri, chainId } = this.settings;
    if (parsed.domain !== domain) throw refused(`the message is for domain "${parsed.domain}"`);
    if (parsed.uri !== uri) throw refused(`the message is for URI "${parsed.uri}"`);
    if (parsed.chainId !== chainId) throw refused(`the message is for chain ${parsed.chainId}`);
    if (parsed.version !== '1') throw refused(`the message has version ${parsed.version}`);
    if (parsed.scheme !== undefined && `${parsed.scheme}:` !== new URL(uri).protocol) {
      throw refused(`the message is for scheme "${parsed.scheme}"`);
    }
    try {
      return parseWalletAddress(parsed.address);
    } catch {
      throw refused('the message names no valid address');
    }
  }

  private checkTimes(parsed: SiweMessage): void {
    const now = this.now().getTime();
    const skew = this.settings.clockSkewMs;
    const issuedAt = timeOf(parsed.issuedAt, 'issued-at');
    if (issuedAt === undefined) throw refused('the message has no issued-at time');
    if (issuedAt > now + skew) throw refused('the message was issued in the future');
    // No nonce outlives its TTL, so an older message cannot be valid: say so instead of "unknown nonce".
    if (issuedAt < now - this.settings.challengeTtlMs - skew) throw refused('the message is too old');
    const expiresAt = timeOf(parsed.expirationTime, 'expiration');
    if (expiresAt !== undefined && now >= expiresAt + skew) throw refused('the message has expired');
    const notBefore = timeOf(parsed.notBefore, 'not-before');
    if (notBefore !== undefined && now + skew < notBefore) throw refused('the message is not valid yet');
  }
}

function parse(message: string): SiweMessage {
  let parsed: SiweMessage;
  try {
    parsed = new SiweMessage(message);
  } catch (error) {
    throw refused('the message is not an EIP-4361 sign-in message', error);
  }
  // What was signed must be exactly what was parsed: no text the parser skipped can ride along.
  if (parsed.prepareMessage() !== message) throw refused('the message is not in canonical EIP-4361 form');
  return parsed;
}

function checkSignature(message: string, signature: string, signer: WalletAddress): void {
  let recovered: string;
  try {
    recovered = verifyMessage(message, signature);
  } catch (error) {
    throw refused('the signature is malformed', error);
  }
  if (recovered.toLowerCase() !== signer.lowercase) {
    throw refused("the signature is not the message address's personal_sign signature");
  }
}

function timeOf(text: string | undefined, what: string): number | undefined {
  if (text === undefined) return undefined;
  const time = Date.parse(text);
  if (Number.isNaN(time)) throw refused(`the ${what} time is not a valid timestamp`);
  return time;
}

function refused(reason: string, cause?: unknown): AppError {
  return new AppError('unauthorized', { message: `Sign-in refused: ${reason}.`, cause });
}
