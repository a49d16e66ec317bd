import type { ServiceClient } from '@svc/proto';
import { Wallet, type HDNodeWallet } from 'ethers';
import type { KeyServiceMethods } from '../../src/grpc/key-service-handlers.js';

/** Signs in with a real wallet: challenge, personal_sign, verify. Returns the token. */
export async function signIn(
  client: ServiceClient<KeyServiceMethods>,
  wallet: HDNodeWallet,
): Promise<string> {
  const challenge = await client.createChallenge({ address: { hex: wallet.address } });
  const signature = await wallet.signMessage(challenge.message);
  const result = await client.verifySignIn({ message: challenge.message, signature });
  return result.token;
}

export function randomWallet(): HDNodeWallet {
  return Wallet.createRandom();
}
