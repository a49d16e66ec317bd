// Sign-in with Ethereum (`/api/auth`) and the chain a wallet pays on (`/api/chain`), as answered.

/** `GET /api/auth/challenge`. */
export interface SignInChallengeJson {
  /** 32 hex digits, single use, bound to `message`. */
  readonly nonce: string;
  /** The EIP-4361 message to sign, unchanged, with `personal_sign`. */
  readonly message: string;
}

/** `POST /api/auth/verify` body: the challenge's message, byte for byte, and its signature. */
export interface SignInRequestJson {
  readonly message: string;
  readonly signature: string;
}

/** `POST /api/auth/verify`. */
export interface SignInResultJson {
  /** The sign-in token (a compact JWT), for `Authorization: Bearer` on the key routes. */
  readonly token: string;
  /** When the token expires, ISO 8601 UTC. */
  readonly expiresAt: string;
  /** The signed-in wallet, EIP-55 checksummed. */
  readonly address: string;
}

/** `GET /api/chain`: where a wallet's prepaid balance and authorization are read. */
export interface ChainJson {
  /** The EIP-155 chain id. */
  readonly chainId: number;
  /** JobRegistry, EIP-55 checksummed. */
  readonly jobRegistry: string;
  /** The service's signer, which wallets authorize; null on a server that runs no completions. */
  readonly delegate: string | null;
}
