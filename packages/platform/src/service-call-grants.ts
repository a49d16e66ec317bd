import type { ServiceName } from './service-token-keys.js';

/**
 * What each service may call of the others, method by method: the call graph of the code, and nothing
 * more. A method missing here is refused PERMISSION_DENIED to that service even with a valid token; the
 * gateway, which faces the internet, never settles a payment itself (the job-orchestrator does, when it
 * submits the job). Adding a call between the services means adding its method here. Internal callers of
 * the deploying team get theirs from SERVICE_TOKEN_INTERNAL_CALLERS.
 */
export const SERVICE_CALL_GRANTS: Readonly<Record<ServiceName, readonly string[]>> = {
  gateway: [
    // /api: sign-in and key management
    'KeyService.CreateChallenge',
    'KeyService.VerifySignIn',
    'KeyService.AuthenticateToken',
    'KeyService.GetJwks',
    'KeyService.MintKey',
    'KeyService.ListKeys',
    'KeyService.UpdateSpendCap',
    'KeyService.RevokeKey',
    'KeyService.DeleteKey',
    'KeyService.ListUsage',
    // /v1: keys, spend, limit hits
    'KeyService.ResolveKey',
    'KeyService.ReserveSpend',
    'KeyService.CommitSpend',
    'KeyService.ReleaseSpend',
    'KeyService.RecordLimitHits',
    'JobOrchestrator.ListModels',
    'JobOrchestrator.QuoteFee',
    'JobOrchestrator.DescribeChain',
    'JobOrchestrator.RunCompletion',
    // per-call payments: requirements, verification and release; never SettlePayment
    'PaymentSettler.GetRequirements',
    'PaymentSettler.VerifyPayment',
    'PaymentSettler.ReleasePayment',
  ],
  'job-orchestrator': ['PaymentSettler.SettlePayment'],
  'key-service': [],
  'payment-settler': [],
};
