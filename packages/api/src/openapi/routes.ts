import type { ApiErrorName } from '../errors/catalogue.js';

// Every route of docs/api.md under `/v1` and `/api` (plus `/openapi.json` itself), as the OpenAPI document
// (./document.ts) describes it: its credential, its body, its success and the catalogue errors it answers.
// The error codes and their statuses come from the catalogue; which route answers which is stated here.

export type Credential = 'none' | 'apiKey' | 'signInToken' | 'apiKeyOrPayment';

/** A named component schema of ./document.ts. */
export type RequestSchemaName =
  'MintKeyRequest' | 'SpendCapRequest' | 'SignInRequest' | 'ChatCompletionRequest';
export type ResponseSchemaName =
  | 'ApiKeyList'
  | 'MintedApiKey'
  | 'ApiKey'
  | 'SignInChallenge'
  | 'SignInResult'
  | 'Chain'
  | 'UsageList'
  | 'ModelList'
  | 'ChatCompletion'
  | 'OpenApiDocument';

/** A query parameter; its schema is a named component of ./document.ts. */
export interface QueryParameter {
  readonly name: string;
  readonly required: boolean;
  readonly schema: string;
}

export interface RouteSpec {
  readonly method: 'get' | 'post' | 'patch' | 'delete';
  /** OpenAPI path template. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  /** Which error shape the route answers in. */
  readonly surface: 'v1' | 'api' | 'none';
  readonly credential: Credential;
  /** Sends `x-ratelimit-limit` and `x-ratelimit-remaining` on the answers past its rate limit. */
  readonly rateLimited: boolean;
  readonly cacheControl: string;
  readonly query?: readonly QueryParameter[];
  readonly requestBody?: { readonly schema: RequestSchemaName; readonly required: boolean };
  readonly success: {
    readonly status: 200 | 201 | 204;
    readonly description: string;
    readonly schema?: ResponseSchemaName;
    /** Also answers `text/event-stream` (with `stream: true`). */
    readonly stream?: boolean;
  };
  readonly errors: readonly ApiErrorName[];
}

const KEY_ROUTE_ERRORS = ['unauthorized', 'rate_limit_exceeded', 'internal'] as const;

export const ROUTES: readonly RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/models',
    operationId: 'listModels',
    summary: 'The models at least one worker serves right now',
    description: 'Send an `id` verbatim as `model` in a completion, colons included.',
    surface: 'v1',
    credential: 'apiKey',
    rateLimited: true,
    cacheControl: 'no-store',
    success: { status: 200, description: 'The model list.', schema: 'ModelList' },
    errors: ['invalid_api_key', 'rate_limit_exceeded', 'internal'],
  },
  {
    method: 'post',
    path: '/v1/chat/completions',
    operationId: 'createChatCompletion',
    summary: 'A chat completion, run as one job on JobRegistry',
    description:
      'Paid from the wallet behind the API key, or per call with `PAYMENT-SIGNATURE` (x402 version 2, ' +
      'scheme `prepaid-debit`) and no `Authorization`. With `stream: true` the answer is ' +
      '`text/event-stream`: `chat.completion.chunk` events, the last carrying `service`, then `data: [DONE]`; ' +
      'a failure after the first chunk ends the stream with one error event in place of `[DONE]`.',
    surface: 'v1',
    credential: 'apiKeyOrPayment',
    rateLimited: true,
    cacheControl: 'no-store',
    requestBody: { schema: 'ChatCompletionRequest', required: true },
    success: {
      status: 200,
      description: 'The answer (JSON), or its server-sent events when `stream` is true.',
      schema: 'ChatCompletion',
      stream: true,
    },
    errors: [
      'invalid_request',
      'context_length_exceeded',
      'invalid_payload',
      'invalid_x402_version',
      'unsupported_scheme',
      'invalid_network',
      'invalid_payment_requirements',
      'invalid_api_key',
      'delegate_not_authorized',
      'insufficient_balance',
      'allowance_exhausted',
      'spend_cap_exceeded',
      'payment_required',
      'insufficient_funds',
      'invalid_prepaid_debit_payload_expired',
      'invalid_prepaid_debit_payload_nonce_used',
      'invalid_prepaid_debit_payload_signature',
      'invalid_prepaid_debit_payload_over_cap',
      'invalid_prepaid_debit_payload_facilitator_mismatch',
      'invalid_prepaid_debit_payload_recipient_mismatch',
      'invalid_prepaid_debit_facilitator_not_authorized',
      'invalid_transaction_state',
      'model_not_found',
      'rate_limit_exceeded',
      'concurrency_limit_exceeded',
      'session_open_limit_exceeded',
      'internal',
      'job_failed',
      'unexpected_verify_error',
      'unexpected_settle_error',
      'no_worker_available',
      'blob_fee_too_high',
      'not_configured',
    ],
  },
  {
    method: 'get',
    path: '/api/auth/challenge',
    operationId: 'getSignInChallenge',
    summary: 'A Sign-In with Ethereum (EIP-4361) message for the wallet to sign',
    surface: 'api',
    credential: 'none',
    rateLimited: true,
    cacheControl: 'no-store',
    query: [{ name: 'address', required: true, schema: 'WalletAddress' }],
    success: { status: 200, description: 'The nonce and the message to sign.', schema: 'SignInChallenge' },
    errors: ['invalid_request', 'rate_limit_exceeded', 'internal'],
  },
  {
    method: 'post',
    path: '/api/auth/verify',
    operationId: 'verifySignIn',
    summary: 'Trades the signed challenge for a sign-in token',
    surface: 'api',
    credential: 'none',
    rateLimited: true,
    cacheControl: 'no-store',
    requestBody: { schema: 'SignInRequest', required: true },
    success: { status: 200, description: 'The sign-in token, valid for one hour.', schema: 'SignInResult' },
    errors: ['invalid_request', 'unauthorized', 'rate_limit_exceeded', 'internal'],
  },
  {
    method: 'post',
    path: '/api/api-keys',
    operationId: 'mintApiKey',
    summary: 'Mints an API key (at most 25 active per wallet)',
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    requestBody: { schema: 'MintKeyRequest', required: false },
    success: { status: 201, description: 'The key as listed plus `key`.', schema: 'MintedApiKey' },
    errors: ['invalid_request', 'api_key_limit', ...KEY_ROUTE_ERRORS],
  },
  {
    method: 'get',
    path: '/api/api-keys',
    operationId: 'listApiKeys',
    summary: 'Every key of the wallet, revoked ones included, newest first',
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    success: { status: 200, description: 'The keys as listed.', schema: 'ApiKeyList' },
    errors: [...KEY_ROUTE_ERRORS],
  },
  {
    method: 'patch',
    path: '/api/api-keys/{id}',
    operationId: 'setSpendCap',
    summary: "Sets or removes an active key's lifetime spend cap",
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    requestBody: { schema: 'SpendCapRequest', required: true },
    success: { status: 200, description: 'The key as listed with its new cap.', schema: 'ApiKey' },
    errors: ['invalid_request', 'api_key_not_found', 'api_key_revoked', ...KEY_ROUTE_ERRORS],
  },
  {
    method: 'post',
    path: '/api/api-keys/{id}/revoke',
    operationId: 'revokeApiKey',
    summary: 'Revokes a key: it stops working on /v1 at once (revoking again changes nothing)',
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    success: { status: 204, description: 'Revoked.' },
    errors: ['invalid_request', 'api_key_not_found', ...KEY_ROUTE_ERRORS],
  },
  {
    method: 'delete',
    path: '/api/api-keys/{id}',
    operationId: 'deleteApiKey',
    summary: 'Deletes a revoked key from the listing',
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    success: { status: 204, description: 'Deleted.' },
    errors: ['invalid_request', 'api_key_not_found', 'api_key_active', ...KEY_ROUTE_ERRORS],
  },
  {
    method: 'get',
    path: '/api/usage',
    operationId: 'listUsage',
    summary: "The wallet's /v1 calls, newest first, a page at a time",
    description:
      'Extension: not part of the interface specification. The calls of its keys (revoked and deleted ' +
      'included) and its own per-call payments, listed once the job-orchestrator accepted them.',
    surface: 'api',
    credential: 'signInToken',
    rateLimited: true,
    cacheControl: 'no-store',
    query: [
      { name: 'from', required: false, schema: 'UsageFrom' },
      { name: 'to', required: false, schema: 'UsageTo' },
      { name: 'key', required: false, schema: 'UsageKey' },
      { name: 'cursor', required: false, schema: 'UsageCursor' },
      { name: 'limit', required: false, schema: 'UsageLimit' },
    ],
    success: { status: 200, description: 'A page of usage records.', schema: 'UsageList' },
    errors: ['invalid_request', ...KEY_ROUTE_ERRORS],
  },
  {
    method: 'get',
    path: '/api/chain',
    operationId: 'describeChain',
    summary: 'The chain completions are paid on: chain id, JobRegistry and the delegate to authorize',
    surface: 'api',
    credential: 'none',
    rateLimited: true,
    cacheControl: 'no-store',
    success: { status: 200, description: 'The chain.', schema: 'Chain' },
    errors: ['rate_limit_exceeded', 'not_configured', 'internal'],
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document',
    description: 'Extension: not part of the interface specification. Public and cacheable.',
    surface: 'none',
    credential: 'none',
    rateLimited: false,
    cacheControl: 'public, max-age=300',
    success: { status: 200, description: 'The OpenAPI 3.1 document.', schema: 'OpenApiDocument' },
    errors: [],
  },
];
