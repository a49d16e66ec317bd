import { z } from 'zod';
import { API_ERRORS, type ApiErrorName } from '../errors/catalogue.js';
import { REMEDIES } from '../errors/remedies.js';
import { chatCompletionRequestSchema } from '../v1/chat-completion-request.js';
import { MAX_CONVERSATION_ID_LENGTH, SERVICE_HEADER } from '../v1/chat-completion.js';
import { paymentPayloadSchema } from '../x402/payment-payload.js';
import { PAYMENT_REQUIRED_HEADER, PAYMENT_RESPONSE_HEADER, PAYMENT_SIGNATURE_HEADER } from '../x402/wire.js';
import { ROUTES, type RouteSpec } from './routes.js';
import * as wire from './wire-schemas.js';

// The OpenAPI 3.1 document of `/v1` and `/api` (docs/api.md), generated from the zod schemas the gateway
// reads requests with (`@svc/api/schemas`) and the schemas of what it answers (./wire-schemas.ts), with zod's
// own JSON Schema output (draft 2020-12, OpenAPI 3.1's dialect). Error responses enumerate, per route and
// status, the catalogue codes that route answers.

type Json = Record<string, unknown>;

const SCHEMA_REF = '#/components/schemas/';
const ref = (name: string) => ({ $ref: `${SCHEMA_REF}${name}` });

/** Schemas of what callers send: JSON Schema of what the readers accept (`io: 'input'`). */
const REQUEST_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  ChatCompletionRequest: chatCompletionRequestSchema,
  PaymentPayload: paymentPayloadSchema,
  MintKeyRequest: wire.mintKeyRequestSchema,
  SpendCapRequest: wire.spendCapRequestSchema,
  SignInRequest: wire.signInRequestSchema,
  WalletAddress: wire.challengeAddressSchema,
  UsageFrom: wire.usageQuerySchemas.from,
  UsageTo: wire.usageQuerySchemas.to,
  UsageKey: wire.usageQuerySchemas.key,
  UsageCursor: wire.usageQuerySchemas.cursor,
  UsageLimit: wire.usageQuerySchemas.limit,
};

/** Schemas of what the gateway answers (`io: 'output'`: an undocumented field fails them). */
const RESPONSE_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  LimitHits: wire.limitHitsSchema,
  ApiKey: wire.apiKeySchema,
  MintedApiKey: wire.mintedApiKeySchema,
  ApiKeyList: wire.apiKeyListSchema,
  SignInChallenge: wire.signInChallengeSchema,
  SignInResult: wire.signInResultSchema,
  Chain: wire.chainSchema,
  UsageList: wire.usageListSchema,
  ServiceObject: wire.serviceObjectSchema,
  ModelList: wire.modelListSchema,
  ChatCompletion: wire.chatCompletionSchema,
  ChatCompletionChunk: wire.chatCompletionChunkSchema,
  StreamErrorEvent: wire.streamErrorEventSchema,
  PrepaidDebitRequirements: wire.prepaidDebitRequirementsSchema,
  PaymentRequired: wire.paymentRequiredSchema,
  PaymentResponse: wire.paymentResponseSchema,
  OpenApiDocument: z
    .looseObject({ openapi: z.string(), info: z.looseObject({}), paths: z.looseObject({}) })
    .meta({ description: 'An OpenAPI 3.1 document.' }),
};

/** One registry's schemas as components: each refers to the others by `#/components/schemas/<name>`. */
function componentSchemas(schemas: Readonly<Record<string, z.ZodType>>, io: 'input' | 'output'): Json {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const { schemas: converted } = z.toJSONSchema(registry, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
    uri: (id) => `${SCHEMA_REF}${id}`,
  });
  const components: Json = {};
  for (const [id, schema] of Object.entries(converted)) {
    if (id === '__shared') throw new Error('a component refers to a schema outside the document');
    const { $id: _id, $schema: _schema, ...rest } = schema as Json;
    components[id] = rest;
  }
  return components;
}

/**
 * What the request schema checks in code that JSON Schema does not carry over, stated in JSON Schema: it
 * reads `content` through a preprocess (a string is one text part), whose input `messageContentSchema`
 * states, and counts `conversation_id` in code points, as JSON Schema's `maxLength` does. (That the last
 * message is the user's, JSON Schema cannot say; the description does.)
 */
function withCodeChecks(request: Json): Json {
  const messages = (request.properties as Json).messages as Json;
  const message = messages.items as Json;
  const content = z.toJSONSchema(wire.messageContentSchema, { target: 'draft-2020-12', io: 'input' });
  const { $schema: _schema, ...contentSchema } = content as Json;
  const { type: _type, ...conversationId } = (request.properties as Json).conversation_id as Json;
  return {
    ...request,
    properties: {
      ...(request.properties as Json),
      conversation_id: {
        ...conversationId,
        anyOf: [{ type: 'string', maxLength: MAX_CONVERSATION_ID_LENGTH }, { type: 'null' }],
        description: 'Extension: prefer the session that last served this conversation; "" is as absent.',
      },
      messages: {
        ...messages,
        description: "The whole conversation; the last message must be the user's.",
        items: {
          ...message,
          properties: { ...(message.properties as Json), content: contentSchema },
          required: ['role', 'content'],
        },
      },
    },
  };
}

/** The code a route answers an error with, on its surface (`null`: `/v1`'s code null). */
function wireCode(route: RouteSpec, name: ApiErrorName): string | null {
  const spec = API_ERRORS[name] as { v1Code?: string | null; apiCode?: string };
  const code = route.surface === 'v1' ? spec.v1Code : spec.apiCode;
  if (code === undefined) throw new Error(`${name} has no ${route.surface} code (${route.operationId})`);
  return code;
}

function errorsByStatus(route: RouteSpec): Map<number, ApiErrorName[]> {
  const byStatus = new Map<number, ApiErrorName[]>();
  for (const name of route.errors) {
    const status = API_ERRORS[name].httpStatus;
    byStatus.set(status, [...(byStatus.get(status) ?? []), name]);
  }
  return byStatus;
}

function errorSchemaName(route: RouteSpec, status: number): string {
  return `${route.operationId[0]!.toUpperCase()}${route.operationId.slice(1)}Error${status}`;
}

/** The error body of one route and status, its codes enumerated. */
function errorBodySchema(route: RouteSpec, names: readonly ApiErrorName[]): z.ZodType {
  const codes = names.map((name) => wireCode(route, name));
  const types = [...new Set(names.map((name) => API_ERRORS[name].openaiType))];
  return route.surface === 'v1'
    ? wire.v1ErrorBodySchema(codes, types)
    : wire.apiErrorBodySchema(codes.filter((code): code is string => code !== null));
}

const HEADER_REF = '#/components/headers/';
const headerRef = (name: string) => ({ $ref: `${HEADER_REF}${name}` });

const HEADERS: Json = {
  XRequestId: {
    description:
      "The caller's `x-request-id` when it is 1 to 128 characters of `A-Za-z0-9._:-`, else a fresh UUID.",
    required: true,
    schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
  },
  XContentTypeOptions: { description: 'On every response.', required: true, schema: { const: 'nosniff' } },
  XFrameOptions: { description: 'On every response.', required: true, schema: { const: 'DENY' } },
  ReferrerPolicy: { description: 'On every response.', required: true, schema: { const: 'no-referrer' } },
  ContentSecurityPolicy: {
    description: "On every response: the API's policy allows nothing.",
    required: true,
    schema: { const: "default-src 'none'; frame-ancestors 'none'" },
  },
  RetryAfter: {
    description: 'Whole seconds to wait, at least 1.',
    required: true,
    schema: { type: 'string', pattern: '^[1-9][0-9]*$' },
  },
  XRateLimitLimit: {
    description: 'The rate limit that counted this call (calls per window).',
    required: false,
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  XRateLimitRemaining: {
    description: 'Calls left in the window.',
    required: false,
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  XService: {
    description:
      'The `service` object as JSON, from the start of the response (streams included). After an automatic retry it names the job that answered.',
    required: true,
    content: { 'application/json': { schema: ref('ServiceObject') } },
  },
  PaymentRequired: {
    description:
      'On a 402, and on the 400s that concern the payment, from a server taking per-call payments: base64 of the payment requirements (`x-decoded`).',
    required: false,
    schema: { type: 'string', contentEncoding: 'base64', contentMediaType: 'application/json' },
    'x-decoded': ref('PaymentRequired'),
  },
  PaymentResponse: {
    description: 'On a call paid per call: base64 of the settlement JSON (`x-decoded`).',
    required: false,
    schema: { type: 'string', contentEncoding: 'base64', contentMediaType: 'application/json' },
    'x-decoded': ref('PaymentResponse'),
  },
  XAccelBuffering: {
    description: 'On a stream: `no`, so proxies pass each event on at once.',
    required: false,
    schema: { type: 'string', const: 'no' },
  },
};

function responseHeaders(route: RouteSpec, status: number): Json {
  const headers: Json = {
    'x-request-id': headerRef('XRequestId'),
    'x-content-type-options': headerRef('XContentTypeOptions'),
    'x-frame-options': headerRef('XFrameOptions'),
    'referrer-policy': headerRef('ReferrerPolicy'),
    'content-security-policy': headerRef('ContentSecurityPolicy'),
  };
  // A stream is `no-cache` (its status and headers go out with its first event).
  const cacheControl = [route.cacheControl, ...(route.success.stream && status === 200 ? ['no-cache'] : [])];
  headers['cache-control'] = {
    description: 'How the answer may be cached.',
    required: true,
    schema: { enum: cacheControl },
  };
  if (route.rateLimited) {
    headers['x-ratelimit-limit'] = headerRef('XRateLimitLimit');
    headers['x-ratelimit-remaining'] = headerRef('XRateLimitRemaining');
  }
  if (status === 429) headers['retry-after'] = headerRef('RetryAfter');
  if (route.credential === 'apiKeyOrPayment') {
    if (status === 200) {
      headers[SERVICE_HEADER] = headerRef('XService');
      headers['x-accel-buffering'] = headerRef('XAccelBuffering');
    }
    if (status === 400 || status === 402) headers[PAYMENT_REQUIRED_HEADER] = headerRef('PaymentRequired');
    headers[PAYMENT_RESPONSE_HEADER] = headerRef('PaymentResponse');
  }
  return headers;
}

function errorResponse(route: RouteSpec, status: number, names: readonly ApiErrorName[]): Json {
  const codes = names.map((name) => wireCode(route, name));
  const lines = names.map((name) => {
    const code = wireCode(route, name);
    const remedy = code === null ? undefined : REMEDIES[code];
    const { message } = API_ERRORS[name];
    return `- \`${String(code)}\`: ${message}${remedy && !message.includes(remedy) ? ` ${remedy}` : ''}`;
  });
  return {
    description: [
      `Error (${route.surface === 'v1' ? "OpenAI's shape" : '`{ error, message }`'}).`,
      ...lines,
    ].join('\n'),
    headers: responseHeaders(route, status),
    content: { 'application/json': { schema: ref(errorSchemaName(route, status)) } },
    'x-error-codes': codes,
  };
}

const SECURITY: Record<RouteSpec['credential'], Json[]> = {
  none: [],
  apiKey: [{ apiKey: [] }],
  signInToken: [{ signInToken: [] }],
  // A key, a per-call payment, or both (the payer must then be the key's wallet).
  apiKeyOrPayment: [{ apiKey: [] }, { x402: [] }, { apiKey: [], x402: [] }],
};

function operation(route: RouteSpec): Json {
  const parameters: Json[] = [{ $ref: '#/components/parameters/XRequestId' }];
  if (route.path.includes('{id}')) parameters.push({ $ref: '#/components/parameters/ApiKeyId' });
  for (const query of route.query ?? [])
    parameters.push({
      name: query.name,
      in: 'query',
      required: query.required,
      description: 'Given at most once.',
      schema: ref(query.schema),
    });
  if (route.credential === 'apiKeyOrPayment')
    parameters.push({ $ref: '#/components/parameters/PaymentSignature' });

  const { success } = route;
  const content: Json = {};
  if (success.schema) content['application/json'] = { schema: ref(success.schema) };
  if (success.stream)
    content['text/event-stream'] = {
      schema: { type: 'string', description: 'Server-sent events, one `data:` line each.' },
      'x-event-data': {
        oneOf: [ref('ChatCompletionChunk'), ref('StreamErrorEvent'), { const: '[DONE]' }],
      },
    };
  const responses: Json = {
    [String(success.status)]: {
      description: success.description,
      headers: responseHeaders(route, success.status),
      ...(Object.keys(content).length > 0 ? { content } : {}),
    },
  };
  for (const [status, names] of errorsByStatus(route))
    responses[String(status)] = errorResponse(route, status, names);

  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.path.startsWith('/v1') ? 'v1' : route.path.startsWith('/api') ? 'api' : 'meta'],
    security: SECURITY[route.credential],
    parameters,
    ...(route.requestBody
      ? {
          requestBody: {
            required: route.requestBody.required,
            content: { 'application/json': { schema: ref(route.requestBody.schema) } },
          },
        }
      : {}),
    responses,
  };
}

export interface OpenApiDocumentOptions {
  /** The base URL clients call (PUBLIC_URL); default: relative to where the document was fetched. */
  readonly serverUrl?: string;
}

/** The OpenAPI 3.1 document of `/v1` and `/api`. */
export function openApiDocument(options: OpenApiDocumentOptions = {}): Json {
  const errorSchemas: Record<string, z.ZodType> = {};
  for (const route of ROUTES)
    for (const [status, names] of errorsByStatus(route))
      errorSchemas[errorSchemaName(route, status)] = errorBodySchema(route, names);

  const requests = componentSchemas(REQUEST_SCHEMAS, 'input');
  requests.ChatCompletionRequest = withCodeChecks(requests.ChatCompletionRequest as Json);
  const schemas = {
    ...requests,
    ...componentSchemas({ ...RESPONSE_SCHEMAS, ...errorSchemas }, 'output'),
  };

  const paths: Record<string, Json> = {};
  for (const route of ROUTES) paths[route.path] = { ...paths[route.path], [route.method]: operation(route) };

  return {
    openapi: '3.1.1',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'svc: OpenAI-compatible chat completions answered on chain',
      version: '1',
      description:
        'The `/v1` (OpenAI-compatible) and `/api` (sign-in, API keys, chain) surfaces of docs/api.md. ' +
        'Money is wei, a decimal string; times are ISO 8601 UTC.',
    },
    servers: [{ url: options.serverUrl ?? '/' }],
    tags: [
      { name: 'v1', description: 'Models and chat completions (OpenAI-compatible).' },
      { name: 'api', description: 'Wallet sign-in, API key management and the chain.' },
      { name: 'meta', description: 'This document.' },
    ],
    paths,
    components: {
      schemas,
      headers: HEADERS,
      parameters: {
        XRequestId: {
          name: 'x-request-id',
          in: 'header',
          required: false,
          description: 'Echoed when 1 to 128 characters of `A-Za-z0-9._:-`.',
          schema: { type: 'string' },
        },
        ApiKeyId: {
          name: 'id',
          in: 'path',
          required: true,
          description: "The key's id; another wallet's, unknown or malformed: 404 api_key_not_found.",
          schema: { type: 'string' },
        },
        PaymentSignature: {
          name: PAYMENT_SIGNATURE_HEADER,
          in: 'header',
          required: false,
          description:
            'Experimental per-call payment: base64 of a JSON x402 version 2 `prepaid-debit` payment (`x-decoded`). Sent with no `Authorization`, or beside a key of the payer.',
          schema: { type: 'string', contentEncoding: 'base64', contentMediaType: 'application/json' },
          'x-decoded': ref('PaymentPayload'),
        },
      },
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'svc_ API key',
          description: 'An API key (`svc_` and 43 base-62 characters) minted by a wallet; every `/v1` route.',
        },
        signInToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'The sign-in token of `POST /api/auth/verify`, valid for one hour; the key routes.',
        },
        x402: {
          type: 'apiKey',
          in: 'header',
          name: PAYMENT_SIGNATURE_HEADER,
          description: 'Per-call payment (x402 version 2, scheme `prepaid-debit`), experimental.',
        },
      },
    },
  };
}
