import { AppError } from '@svc/platform';
import { verifyMessage } from 'ethers';
import { SiweMessage } from 'siwe';
import { parseWalletAddress, type WalletAddress } from '../wallet/wallet-address.js';
import type { SignInChallenges, SiweSettings } from './sign-in-challenges.js';

/** `0x` and whole bytes of hex: what any wallet, EOA or contract, sends as a signature. */
const HEX_BYTES = /^0x(?:[0-9a-fA-F]{2})*$/;
/** The suffix ending every EIP-6492 signature (a contract wallet that is not deployed yet). */
const EIP6492_MAGIC_SUFFIX = '6492'.repeat(16);
/** r, s, v (`personal_sign`), or EIP-2098's r and yParity-with-s: the two encodings of one ECDSA signature. */
const ECDSA_SIGNATURE_BYTES = new Set([65, 64]);
/** An EIP-4361 message with our fields is a few hundred bytes; anything far larger is not one. */
const MAX_MESSAGE_LENGTH = 4096;
const CONTRACT_WALLETS_UNSUPPORTED =
  'smart-contract wallets (EIP-1271/EIP-6492) cannot sign in yet: sign with an externally owned account';

/**
 * Why a sign-in was refused, in a word an operator can count by (the error's message says it in full):
 * `malformed` request, a `message` that is no EIP-4361 message of ours, a `mismatch` of domain, URI,
 * chain, version or scheme (a misconfigured client or SIWE_* setting), its `time`s (clock skew), a
 * `contract_wallet`, a `signature` of another key, a `nonce` unknown, used or issued for another message.
 */
export type SignInRefusalReason =
  'malformed' | 'message' | 'mismatch' | 'time' | 'contract_wallet' | 'signature' | 'nonce';

/** A refused sign-in: `invalid_request` when malformed, else `unauthorized`, with its reason. */
export class SignInRefusal extends AppError {
  constructor(
    readonly reason: SignInRefusalReason,
    message: string,
    cause?: unknown,
  ) {
    super(reason === 'malformed' ? 'invalid_request' : 'unauthorized', {
      message: reason === 'malformed' ? message : `Sign-in refused: ${message}.`,
      cause,
    });
  }
}

/**
 * Checks a signed EIP-4361 message the way docs/api.md describes: fields against configuration, times
 * with a small clock skew, the `personal_sign` signature of an externally owned account, and last the
 * nonce, spent only by the very message issued with it once it is otherwise fully valid.
 *
 * siwe parses the message (its ABNF parser); the checks are ours, because `SiweMessage.verify` compares
 * only the fields it is handed, has no clock skew, and writes to the console on a malformed signature.
 * Contract wallets (EIP-1271, EIP-6492) are refused with a reason saying so: verifying them needs a chain
 * connection this service does not have.
 */
export class SignedMessageVerifier {
  constructor(
    private readonly challenges: SignInChallenges,
    private readonly settings: SiweSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async verify(message: string, signature: string): Promise<WalletAddress> {
    if (typeof message !== 'string' || message.length === 0 || message.length > MAX_MESSAGE_LENGTH) {
      throw new SignInRefusal('malformed', 'message must be the signed EIP-4361 message.');
    }
    checkSignatureKind(signature);
    const parsed = parse(message);
    const signer = this.checkFields(parsed);
    this.checkTimes(parsed);
    checkSignature(message, signature, signer);
    // Last, so that only a message passing every other check can spend the nonce (see consume).
    const spend = await this.challenges.consume(parsed.nonce, message);
    if (spend === 'other-message') {
      throw refused(
        'nonce',
        'the message is not the message issued with its nonce; sign the challenge message exactly as issued',
      );
    }
    if (spend === 'unknown') throw refused('nonce', 'the nonce is unknown, expired or already used');
    return signer;
  }

  private checkFields(parsed: SiweMessage): WalletAddress {
    const { domain, uri, chainId } = this.settings;
    if (parsed.domain !== domain) throw refused('mismatch', `the message is for domain "${parsed.domain}"`);
    if (parsed.uri !== uri) throw refused('mismatch', `the message is for URI "${parsed.uri}"`);
    if (parsed.chainId !== chainId) throw refused('mismatch', `the message is for chain ${parsed.chainId}`);
    if (parsed.version !== '1') throw refused('mismatch', `the message has version ${parsed.version}`);
    if (parsed.scheme !== undefined && `${parsed.scheme}:` !== new URL(uri).protocol) {
      throw refused('mismatch', `the message is for scheme "${parsed.scheme}"`);
    }
    try {
      return parseWalletAddress(parsed.address);
    } catch {
      throw refused('message', 'the message names no valid address');
    }
  }

  private checkTimes(parsed: SiweMessage): void {
    const now = this.now().getTime();
    const skew = this.settings.clockSkewMs;
    const issuedAt = timeOf(parsed.issuedAt, 'issued-at');
    if (issuedAt === undefined) throw refused('time', 'the message has no issued-at time');
    if (issuedAt > now + skew) throw refused('time', 'the message was issued in the future');
    // No nonce outlives its TTL, so an older message cannot be valid: say so instead of "unknown nonce".
    if (issuedAt < now - this.settings.challengeTtlMs - skew) throw refused('time', 'the message is too old');
    const expiresAt = timeOf(parsed.expirationTime, 'expiration');
    if (expiresAt !== undefined && now >= expiresAt + skew) throw refused('time', 'the message has expired');
    const notBefore = timeOf(parsed.notBefore, 'not-before');
    if (notBefore !== undefined && now + skew < notBefore)
      throw refused('time', 'the message is not valid yet');
  }
}

function parse(message: string): SiweMessage {
  let parsed: SiweMessage;
  try {
    parsed = new SiweMessage(message);
  } catch (error) {
    throw refused('message', 'the message is not an EIP-4361 sign-in message', error);
  }
  // What was signed must be exactly what was parsed: no text the parser skipped can ride along.
  if (parsed.prepareMessage() !== message)
    throw refused('message', 'the message is not in canonical EIP-4361 form');
  return parsed;
}

/**
 * A signature that is not hex is a malformed request; well-formed hex that cannot be an ECDSA signature
 * is what a contract wallet sends (EIP-6492 wrapping, a multi-owner concatenation, any EIP-1271 blob),
 * refused as such rather than as a bad shape.
 */
function checkSignatureKind(signature: string): void {
  if (typeof signature !== 'string' || !HEX_BYTES.test(signature)) {
    throw new SignInRefusal(
      'malformed',
      'signature must be "0x" followed by hex digits: a 65-byte personal_sign signature (130 hex digits), or its 64-byte EIP-2098 compact form.',
    );
  }
  if (signature.toLowerCase().endsWith(EIP6492_MAGIC_SUFFIX)) {
    throw refused(
      'contract_wallet',
      `the signature is an EIP-6492 signature of a contract wallet; ${CONTRACT_WALLETS_UNSUPPORTED}`,
    );
  }
  const bytes = (signature.length - 2) / 2;
  if (!ECDSA_SIGNATURE_BYTES.has(bytes)) {
    throw refused(
      'contract_wallet',
      `the signature is ${bytes} bytes, not an ECDSA signature (65 bytes, or 64 compact); ${CONTRACT_WALLETS_UNSUPPORTED}`,
    );
  }
}

function checkSignature(message: string, signature: string, signer: WalletAddress): void {
  let recovered: string;
  try {
    recovered = verifyMessage(message, signature);
  } catch (error) {
    throw refused(
      'signature',
      `the signature is not a valid ECDSA signature; ${CONTRACT_WALLETS_UNSUPPORTED}`,
      error,
    );
  }
  if (recovered.toLowerCase() !== signer.lowercase) {
    // Another key's signature, or a contract wallet's (an owner's signature for the wallet's address).
    throw refused(
      'signature',
      `the signature does not recover to the message's address: sign with the account the message names (${CONTRACT_WALLETS_UNSUPPORTED})`,
    );
  }
}

function timeOf(text: string | undefined, what: string): number | undefined {
  if (text === undefined) return undefined;
  const time = Date.parse(text);
  if (Number.isNaN(time)) throw refused('message', `the ${what} time is not a valid timestamp`);
  return time;
}

function refused(reason: SignInRefusalReason, message: string, cause?: unknown): SignInRefusal {
  return new SignInRefusal(reason, message, cause);
}
