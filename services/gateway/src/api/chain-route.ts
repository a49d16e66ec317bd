import type { ChainJson } from '@svc/api';
import { AppError } from '@svc/platform';
import type { RequestHandler } from 'express';
import type { CompletionBackend } from '../v1/completion-backend.js';

/**
 * `GET /chain`: the chain id, JobRegistry and the delegate wallets authorize, so a wallet (the web console)
 * reads its prepaid balance, authorization and allowance through its own provider. Public: it names only
 * what the chain shows anyone.
 */
export function describeChainHandler(backend: CompletionBackend | undefined): RequestHandler {
  return async (_req, res) => {
    if (backend === undefined)
      throw new AppError('not_configured', {
        message: 'Completions are off on this server: it pays no jobs on any chain.',
      });
    const chain = await backend.describeChain();
    const described: ChainJson = {
      chainId: chain.chainId,
      jobRegistry: chain.jobRegistry,
      delegate: chain.delegate ?? null,
    };
    res.json(described);
  };
}
