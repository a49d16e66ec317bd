import { InvalidDevnetDescription, readDevnetDescription, type DevnetDescription } from './description.js';

const RPC_TIMEOUT_MS = 10_000;

/**
 * The description of a chain someone else runs (`RPC_URL`, typically `npm run devnet` in another
 * terminal), read from its description file and checked against the chain itself: same chain id, and
 * JobRegistry deployed at the address it names. The RPC URL given wins over the file's.
 */
export async function describeExternalChain(
  rpcUrl: string,
  descriptionPath: string,
): Promise<DevnetDescription> {
  const description = readDevnetDescription(descriptionPath);
  const chainId = Number(BigInt(String(await jsonRpc(rpcUrl, 'eth_chainId', []))));
  if (chainId !== description.chainId) {
    throw new InvalidDevnetDescription(
      `${descriptionPath} describes chain ${description.chainId}, but ${rpcUrl} is chain ${chainId}`,
    );
  }
  const code = await jsonRpc(rpcUrl, 'eth_getCode', [description.contracts.jobRegistry, 'latest']);
  if (code === '0x') {
    throw new InvalidDevnetDescription(
      `no JobRegistry at ${description.contracts.jobRegistry} on ${rpcUrl}: ${descriptionPath} describes another deployment`,
    );
  }
  return { ...description, rpcUrl };
}

// A plain request rather than an ethers provider: ethers retries an unreachable node forever, and
// a wrong RPC_URL must fail start-up with a message instead.
export async function jsonRpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: AbortSignal.timeout(RPC_TIMEOUT_MS),
    });
  } catch (error) {
    throw new Error(`the chain at ${rpcUrl} did not answer ${method}: ${String(error)}`, { cause: error });
  }
  const body = (await response.json()) as { result?: unknown; error?: { message?: string } };
  if (body.error || body.result === undefined) {
    throw new Error(`the chain at ${rpcUrl} refused ${method}: ${body.error?.message ?? response.status}`);
  }
  return body.result;
}
