import { z } from 'zod';
import type { ApiErrorBody, StreamErrorEvent, V1ErrorBody } from '../errors/wire.js';
import type { ApiKeyJson, MintedApiKeyJson, MintKeyRequestJson, SpendCapRequestJson } from '../keys.js';
import type { ChainJson, SignInChallengeJson, SignInRequestJson, SignInResultJson } from '../sign-in.js';
import type { UsageListJson } from '../usage.js';
import {
  type ChatCompletionChunkJson,
  type ChatCompletionJson,
  type ModelListJson,
  type ServiceObject,
} from '../v1/chat-completion.js';
import {
  PREPAID_DEBIT,
  X402_VERSION,
  type PaymentRequired,
  type PaymentResponse,
  type PrepaidDebitRequirements,
} from '../x402/wire.js';

// The runtime schemas of what the gateway answers (and of the `/api` bodies it reads), beside the types of
// keys.ts, sign-in.ts, v1/chat-completion.ts, x402/wire.ts and errors/wire.ts: the OpenAPI document
// (./document.ts) is generated from them. Each is checked against its type below, both ways, so the two
// cannot drift apart silently.

const WEI = /^[0-9]{1,78}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;
const DECIMAL = /^(0|[1-9][0-9]*)$/;

const wei = () => z.string().regex(WEI).meta({ description: 'An amount in wei, a decimal string.' });
const address = () => z.string().regex(ADDRESS).meta({ description: '0x and 40 hex digits.' });
const timestamp = () => z.iso.datetime({ offset: true }).meta({ description: 'ISO 8601 UTC.' });

// ---- /api ----

export const limitHitsSchema = z
  .object({
    rate: z.int().nonnegative(),
    concurrency: z.int().nonnegative(),
    spendCap: z.int().nonnegative(),
    sessionOpens: z.int().nonnegative(),
  })
  .meta({ description: 'How often each limit refused the key.' });

export const apiKeySchema = z
  .object({
    id: z.string().meta({ description: "The key's id (a UUID), used in `/api/api-keys/{id}` paths." }),
    prefix: z
      .string()
      .regex(/^svc_.{7}$/)
      .meta({ description: "`svc_` and the key's next seven characters." }),
    name: z.string().meta({ description: 'Up to 64 characters; "" when none was given.' }),
    spendCapWei: wei().nullable().meta({ description: 'Lifetime spend cap in wei; null: no cap.' }),
    spentWei: wei(),
    limitHits: limitHitsSchema,
    createdAt: timestamp(),
    revokedAt: timestamp().nullable().meta({ description: 'null while the key is active.' }),
  })
  .meta({ description: 'An API key as listed.' });

export const mintedApiKeySchema = apiKeySchema
  .extend({
    key: z
      .string()
      .regex(/^svc_[0-9A-Za-z]{43}$/)
      .meta({ description: 'The full key, shown this once and never again.' }),
  })
  .meta({ description: 'The answer to a mint: the key as listed plus `key`.' });

export const apiKeyListSchema = z
  .array(apiKeySchema)
  .meta({ description: 'Every key of the wallet, revoked ones included, newest first.' });

/** A key's name as `POST /api/api-keys` takes it (the key-service checks the 64 code points). */
const keyName = z
  .string()
  // Code points, as docs/api.md counts them: no control character (C0, DEL, C1), no unpaired surrogate.
  .regex(/^[^\p{Cc}\p{Cs}]{0,64}$/u)
  .meta({ description: 'Up to 64 characters (code points), no control character.' });
const spendCapInput = z
  .string()
  .regex(WEI)
  .meta({ description: '1 to 78 ASCII digits, at most 2^256 - 1; a JSON number is refused.' });

export const mintKeyRequestSchema = z
  .looseObject({ name: keyName.nullish(), spendCapWei: spendCapInput.nullish() })
  .meta({ description: 'Both optional; any other field is ignored.' });

export const spendCapRequestSchema = z
  .looseObject({ spendCapWei: spendCapInput.nullable() })
  .meta({ description: 'The new cap, or null to remove it.' });

export const signInChallengeSchema = z.object({
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  message: z.string().meta({ description: 'The EIP-4361 message to sign with personal_sign.' }),
});

export const signInRequestSchema = z.looseObject({
  message: z.string().meta({ description: 'The challenge message, byte for byte.' }),
  signature: z
    .string()
    .regex(/^0x([0-9a-fA-F]{2})*$/)
    .meta({ description: '65-byte personal_sign signature, or its 64-byte EIP-2098 form.' }),
});

export const signInResultSchema = z.object({
  token: z.string().meta({ description: 'The sign-in token (a compact JWT), valid for one hour.' }),
  expiresAt: timestamp(),
  address: address().meta({ description: 'The signed-in wallet, EIP-55 checksummed.' }),
});

export const chainSchema = z
  .object({
    chainId: z.int().positive(),
    jobRegistry: address(),
    delegate: address().nullable(),
  })
  .meta({ description: 'The chain completions are paid on.' });

export const challengeAddressSchema = address().meta({
  description: 'The wallet: lowercase, uppercase or valid EIP-55 mixed case. Given once.',
});

const nonNegative = () => z.int().nonnegative();

export const usageRecordSchema = z
  .object({
    id: z.string().meta({ description: "The call's id." }),
    time: timestamp().meta({ description: 'When the job-orchestrator accepted the call.' }),
    keyId: z.string().nullable().meta({ description: 'null: a call paid per call without a key.' }),
    payer: address(),
    payment: z.enum(['api_key', 'per_call']),
    model: z.string(),
    outcome: z
      .string()
      .meta({ description: '`answered`, the error code the call ended with, or `pending`.' }),
    jobId: z.string().regex(DECIMAL).nullable(),
    sessionId: z.string().regex(DECIMAL).nullable(),
    txHash: z.string().regex(HASH).nullable(),
    worker: address().nullable(),
    feeWei: wei().nullable().meta({ description: 'null while escrowed.' }),
    droppedMessages: nonNegative(),
    timeToFirstTokenMs: nonNegative().nullable(),
    totalTimeMs: nonNegative().nullable(),
  })
  .meta({ description: 'One `/v1` completion call.' });

export const usageListSchema = z
  .object({
    data: z.array(usageRecordSchema).meta({ description: 'Newest first.' }),
    nextCursor: z.string().nullable().meta({ description: 'null on the last page.' }),
    summary: z
      .object({
        days: z.array(
          z.object({
            day: z.string().regex(/^\d{4}-\d\d-\d\d$/),
            keyId: z.string().nullable(),
            spentWei: wei(),
            calls: nonNegative(),
          }),
        ),
        outcomes: z.array(z.object({ outcome: z.string(), calls: nonNegative() })),
      })
      .nullable()
      .meta({ description: 'Totals over everything the query selects; first page only, else null.' }),
  })
  .meta({ description: 'A page of the usage history (an extension of the interface).' });

const USAGE_TIME = /^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d))?$/;

/** The query of `GET /api/usage`, each parameter given at most once. */
export const usageQuerySchemas = {
  from: z.string().regex(USAGE_TIME).meta({
    description: 'Calls accepted at or after: an ISO 8601 time with a zone, or a date (midnight UTC).',
  }),
  to: z
    .string()
    .regex(USAGE_TIME)
    .meta({ description: 'Calls accepted before, same forms; not before `from`.' }),
  key: z.string().min(1).max(64).meta({ description: "Only this key's calls." }),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,256}$/)
    .meta({
      description: 'The `nextCursor` of the previous page, unchanged, with the same other parameters.',
    }),
  limit: z
    .string()
    // 1 to 200 in at most three digits, leading zeros allowed.
    .regex(/^(?=[0-9]{1,3}$)0{0,2}([1-9]|[1-9][0-9]|1[0-9]{2}|200)$/)
    .meta({ description: 'Records per page, 1 to 200; 50 when absent.' }),
} as const;

// ---- /v1 ----

export const serviceObjectSchema = z
  .object({
    job_id: z.string().regex(DECIMAL),
    session_id: z.string().regex(DECIMAL),
    tx_hash: z.string().regex(HASH),
    worker: address(),
    dropped_messages: z.int().positive().optional(),
  })
  .meta({ description: 'The on-chain job that answered; also sent as `x-service`.' });

export const modelListSchema = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      id: z.string().meta({ description: 'Send verbatim as `model`, colons included.' }),
      object: z.literal('model'),
      created: z.int().nonnegative(),
      owned_by: z.string(),
    }),
  ),
});

export const chatCompletionSchema = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.int().nonnegative(),
    model: z.string(),
    choices: z.tuple([
      z.object({
        index: z.literal(0),
        message: z.object({
          role: z.literal('assistant'),
          content: z.string(),
          refusal: z.null(),
        }),
        logprobs: z.null(),
        finish_reason: z.literal('stop'),
      }),
    ]),
    service: serviceObjectSchema,
  })
  .meta({ description: 'Exactly one choice, no usage, plus `service`.' });

export const chatCompletionChunkSchema = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion.chunk'),
    created: z.int().nonnegative(),
    model: z.string(),
    choices: z.tuple([
      z.object({
        index: z.literal(0),
        delta: z.object({ role: z.literal('assistant').optional(), content: z.string().optional() }),
        logprobs: z.null(),
        finish_reason: z.literal('stop').nullable(),
      }),
    ]),
    service: serviceObjectSchema.optional(),
  })
  .meta({ description: 'One `data:` event of a stream.' });

/** A message's content as a client sends it (the request schema reads it through a preprocess). */
export const messageContentSchema = z
  .union([z.string(), z.array(z.looseObject({ type: z.literal('text'), text: z.string() }))])
  .meta({ description: 'A string, or a list of text parts joined with "\\n".' });

export const streamErrorEventSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      code: z.enum(['job_failed', 'stream_diverged']),
    }),
  })
  .meta({ description: 'Ends a stream after its first chunk, in place of [DONE].' });

// ---- x402 ----

export const prepaidDebitRequirementsSchema = z.looseObject({
  scheme: z.literal(PREPAID_DEBIT),
  network: z.string(),
  amount: wei(),
  asset: address(),
  payTo: address(),
  maxTimeoutSeconds: z.int().nonnegative(),
  extra: z.looseObject({ name: z.string(), version: z.string(), facilitatorAddress: address() }),
});

export const paymentRequiredSchema = z
  .object({
    x402Version: z.literal(X402_VERSION),
    error: z.string(),
    resource: z.object({ url: z.string(), description: z.string(), mimeType: z.string() }),
    accepts: z.array(prepaidDebitRequirementsSchema),
  })
  .meta({ description: 'The JSON of `PAYMENT-REQUIRED` (base64 on the wire).' });

export const paymentResponseSchema = z
  .discriminatedUnion('success', [
    z.object({
      success: z.literal(true),
      transaction: z.string().regex(HASH),
      network: z.string(),
      payer: address(),
      amount: wei(),
    }),
    z.object({
      success: z.literal(false),
      errorReason: z.string(),
      transaction: z.literal(''),
      network: z.string(),
      payer: z.string(),
    }),
  ])
  .meta({ description: 'The JSON of `PAYMENT-RESPONSE` (base64 on the wire).' });

// ---- errors ----

/** A `/v1` error body, OpenAI's shape; `code` narrowed per route and status by the document. */
export function v1ErrorBodySchema(codes: readonly (string | null)[], types: readonly string[]) {
  return z.object({
    error: z.looseObject({
      message: z.string(),
      type: z.enum(types as [string, ...string[]]),
      param: z.string().nullable(),
      code: codeOf(codes),
      accepts: z.array(z.looseObject({ scheme: z.string() })).optional(),
      spend_cap_wei: wei().optional(),
    }),
  });
}

/** An `/api` error body: `{ error, message }`; `error` narrowed per route and status by the document. */
export function apiErrorBodySchema(codes: readonly string[]) {
  return z.object({ error: z.enum(codes as [string, ...string[]]), message: z.string() });
}

function codeOf(codes: readonly (string | null)[]) {
  const named = codes.filter((code): code is string => code !== null);
  const enumerated = named.length > 0 ? z.enum(named as [string, ...string[]]) : undefined;
  if (codes.includes(null)) return enumerated ? enumerated.nullable() : z.null();
  if (!enumerated) throw new Error('an error response needs at least one code');
  return enumerated;
}

// ---- the types agree with the schemas ----

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Plain<T> = T extends readonly unknown[]
  ? { -readonly [K in keyof T]: Plain<T[K]> }
  : T extends object
    ? { -readonly [K in keyof T]: Plain<T[K]> }
    : T;
type Agree<Schema extends z.ZodType, Type> = Same<Plain<z.output<Schema>>, Plain<Type>>;

/** Compile-time only: each line fails to typecheck when a schema and its type disagree. */
export const TYPES_AGREE: readonly true[] = [
  true satisfies Agree<typeof apiKeySchema, ApiKeyJson>,
  true satisfies Agree<typeof mintedApiKeySchema, MintedApiKeyJson>,
  true satisfies Agree<typeof signInChallengeSchema, SignInChallengeJson>,
  true satisfies Agree<typeof signInResultSchema, SignInResultJson>,
  true satisfies Agree<typeof chainSchema, ChainJson>,
  true satisfies Agree<typeof usageListSchema, UsageListJson>,
  true satisfies Agree<typeof serviceObjectSchema, ServiceObject>,
  true satisfies Agree<typeof modelListSchema, ModelListJson>,
  true satisfies Agree<typeof chatCompletionSchema, ChatCompletionJson>,
  true satisfies Agree<typeof chatCompletionChunkSchema, ChatCompletionChunkJson>,
  true satisfies Agree<ReturnType<typeof apiErrorBodySchema>, ApiErrorBody>,
];

// Bodies read leniently (null for absent, other fields kept) only need to accept what the types send.
type Accepts<Schema extends z.ZodType, Type> = Plain<Type> extends Plain<z.input<Schema>> ? true : false;
export const REQUESTS_ACCEPTED: readonly true[] = [
  true satisfies Accepts<typeof mintKeyRequestSchema, MintKeyRequestJson>,
  true satisfies Accepts<typeof spendCapRequestSchema, SpendCapRequestJson>,
  true satisfies Accepts<typeof signInRequestSchema, SignInRequestJson>,
  true satisfies Accepts<typeof prepaidDebitRequirementsSchema, PrepaidDebitRequirements>,
  true satisfies Accepts<typeof paymentRequiredSchema, PaymentRequired>,
];

// Unions and index signatures, checked by plain assignment both ways (or the way the wire allows).
type PaymentResponseOut = z.output<typeof paymentResponseSchema>;
export const paymentResponseAgrees = (out: PaymentResponseOut): PaymentResponse => out;
export const paymentResponseCovers = (sent: PaymentResponse): PaymentResponseOut => sent;
/** Every body the `/v1` error schema reads is a `V1ErrorBody` (whose `type` and `code` are wider). */
/** The stream error event's schema names the two codes a `StreamErrorEvent` may carry. */
export const streamErrorEventAgrees = (out: z.output<typeof streamErrorEventSchema>): StreamErrorEvent => out;
export const v1ErrorBodyAgrees = (out: z.output<ReturnType<typeof v1ErrorBodySchema>>): V1ErrorBody => out;
