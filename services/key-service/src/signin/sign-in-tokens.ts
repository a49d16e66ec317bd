import { randomUUID } from 'node:crypto';
import { AppError } from '@svc/platform';
import { SignJWT, jwtVerify, type JWTHeaderParameters } from 'jose';
import { parseWalletAddress, type WalletAddress } from '../wallet/wallet-address.js';
import { TOKEN_ALGORITHMS, type TokenKeyRing } from './token-key-ring.js';

/**
 * The JOSE `typ` of a sign-in token: a JWT minted elsewhere with the same keys for another purpose cannot
 * pass as a sign-in token.
 */
export const SIGN_IN_TOKEN_TYPE = 'svc-signin+jwt';

/** Leeway for the clocks of verifiers elsewhere; tokens are short-lived and issued here. */
const CLOCK_TOLERANCE_SECONDS = 5;

export interface SignInTokenSettings {
  readonly issuer: string;
  readonly audience: string;
  readonly ttlMs: number;
}

export interface IssuedSignInToken {
  readonly token: string;
  readonly expiresAt: Date;
}

export interface AuthenticatedWallet {
  readonly wallet: WalletAddress;
  readonly expiresAt: Date;
}

/** Issues and checks the JWTs that prove a wallet signed in (the `/api/api-keys` credential). */
export class SignInTokens {
  constructor(
    private readonly keys: TokenKeyRing,
    private readonly settings: SignInTokenSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async issue(wallet: WalletAddress): Promise<IssuedSignInToken> {
    const issuedAtSeconds = Math.floor(this.now().getTime() / 1000);
    const expiresAtSeconds = issuedAtSeconds + Math.ceil(this.settings.ttlMs / 1000);
    const { kid, alg, privateKey } = this.keys.signing;
    const token = await new SignJWT({})
      .setProtectedHeader({ alg, kid, typ: SIGN_IN_TOKEN_TYPE })
      .setSubject(wallet.checksummed)
      .setIssuer(this.settings.issuer)
      .setAudience(this.settings.audience)
      .setIssuedAt(issuedAtSeconds)
      .setExpirationTime(expiresAtSeconds)
      .setJti(randomUUID())
      .sign(privateKey);
    return { token, expiresAt: new Date(expiresAtSeconds * 1000) };
  }

  /** The wallet a token was issued to; `unauthorized` for anything but a valid, current token of ours. */
  async authenticate(token: string): Promise<AuthenticatedWallet> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, (header: JWTHeaderParameters) => this.keyFor(header), {
        algorithms: [...TOKEN_ALGORITHMS],
        issuer: this.settings.issuer,
        audience: this.settings.audience,
        typ: SIGN_IN_TOKEN_TYPE,
        requiredClaims: ['sub', 'iat', 'exp', 'jti'],
        maxTokenAge: Math.ceil(this.settings.ttlMs / 1000) + CLOCK_TOLERANCE_SECONDS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        currentDate: this.now(),
      }));
    } catch (error) {
      throw new AppError('unauthorized', {
        message: 'Sign-in token missing, invalid or expired.',
        cause: error,
      });
    }
    let wallet: WalletAddress;
    try {
      wallet = parseWalletAddress(payload.sub, 'sub');
    } catch (error) {
      throw new AppError('unauthorized', { message: 'Sign-in token names no wallet.', cause: error });
    }
    return { wallet, expiresAt: new Date((payload.exp ?? 0) * 1000) };
  }

  private keyFor(header: JWTHeaderParameters) {
    const key = this.keys.verificationKey(header.kid);
    // The key's own algorithm decides, so a token cannot pick a weaker one for a known kid.
    if (!key || key.alg !== header.alg) throw new Error('unknown token key');
    return key.publicKey;
  }
}
