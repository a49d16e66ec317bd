import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { API_ERRORS, type ApiErrorSpec } from '@svc/api';
import { openApiDocument } from '@svc/api/openapi';
import { OpenApiChecker } from './support/openapi-checker.js';

// The OpenAPI document itself: valid OpenAPI 3.1, and complete against docs/api.md's error codes. Its
// answers are checked against a live gateway in openapi-live.test.ts.

const document = openApiDocument();
const checker = new OpenApiChecker(document);
const API_MD = readFileSync(new URL('../../../../docs/api.md', import.meta.url), 'utf8');

/** Every `(status, code)` the document's error responses enumerate (`null`: `/v1`'s code null). */
function documentedErrors(): Set<string> {
  const errors = new Set<string>();
  for (const observation of checker.documented()) {
    const [, , status, code, streamCode] = observation.split(' ');
    if (code === 'stream') errors.add(`stream ${streamCode}`);
    else if (code !== undefined) errors.add(`${status} ${code}`);
  }
  return errors;
}

/** The rows of the first markdown table after `heading`, cells trimmed. */
function tableAfter(heading: string): string[][] {
  const start = API_MD.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/api.md has no ${heading}`);
  const lines = API_MD.slice(start + heading.length + 2).split('\n');
  const first = lines.findIndex((line) => line.startsWith('|'));
  const end = lines.findIndex((line, index) => index > first && !line.startsWith('|'));
  return lines.slice(first + 2, end).map((line) =>
    line
      .slice(1, -1)
      .split('|')
      .map((cell) => cell.trim()),
  );
}

/** The codes of one cell: `a, b` or `null`. */
function codesOf(cell: string): string[] {
  return cell.split(',').map((code) => code.trim().replaceAll('`', ''));
}

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(document);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(document.openapi).toMatch(/^3\.1\./);
  });

  it('names every /v1 and /api route of docs/api.md', () => {
    // `#### \`GET /v1/models\``, and an extension's `### Usage (\`GET /api/usage\`, an extension)` too.
    const routeHeadings = [
      ...API_MD.matchAll(/^#{3,4} .*?`(GET|POST|PATCH|DELETE) (\/(?:v1|api)\/[^`]*)`/gm),
    ];
    const keyRoutes = tableAfter('### Key routes').map(([method, path]) => [
      method!,
      path!.replaceAll('`', ''),
    ]);
    const listed = [...routeHeadings.map((match) => [match[1]!, match[2]!]), ...keyRoutes];
    expect(listed.length).toBeGreaterThanOrEqual(10);
    for (const [method, path] of listed) expect(() => checker.operation(method!, path!)).not.toThrow();
  });

  it('enumerates every error code of the tables of docs/api.md with its status', () => {
    const errors = documentedErrors();
    const v1 = tableAfter('### `/v1` routes');
    const api = tableAfter('### Key management (`/api`)');
    expect(v1.length).toBeGreaterThan(20);
    expect(api.length).toBeGreaterThan(5);
    for (const [status, cell] of [...v1, ...api])
      for (const code of codesOf(cell!)) expect(errors).toContain(`${status} ${code}`);
    for (const [cell] of tableAfter('### Stream errors'))
      for (const code of codesOf(cell!)) expect(errors).toContain(`stream ${code}`);
  });

  it('enumerates every `status code` docs/api.md names in its text, for paths a route has', () => {
    const errors = documentedErrors();
    // Answered for paths no route has (docs/api.md, Key management errors): not a route's answer.
    const noRoute = new Set(['404 not_found']);
    const named = [...API_MD.matchAll(/`([45]\d\d) ([a-z][a-z0-9_]+)`/g)].map(
      ([, status, code]) => `${status} ${code}`,
    );
    expect(named.length).toBeGreaterThan(30);
    for (const error of named) if (!noRoute.has(error)) expect(errors).toContain(error);
  });

  it('gives each error the status and code of the catalogue', () => {
    const errors = documentedErrors();
    for (const error of errors) {
      if (error.startsWith('stream ')) continue;
      const [status, code] = error.split(' ');
      const entry = Object.values<ApiErrorSpec>(API_ERRORS).find(
        (spec) =>
          (code === 'null' ? spec.v1Code === null : spec.v1Code === code || spec.apiCode === code) &&
          spec.httpStatus === Number(status),
      );
      expect({ error, inCatalogue: entry !== undefined }).toEqual({ error, inCatalogue: true });
    }
  });

  it('describes the credentials: an svc_ key on /v1, the sign-in token on the key routes, x402 on completions', () => {
    const schemes = (document.components as { securitySchemes: Record<string, unknown> }).securitySchemes;
    expect(Object.keys(schemes).sort()).toEqual(['apiKey', 'signInToken', 'x402']);
    expect(checker.operation('GET', '/v1/models').security).toEqual([{ apiKey: [] }]);
    expect(checker.operation('POST', '/v1/chat/completions').security).toEqual(
      expect.arrayContaining([{ apiKey: [] }, { x402: [] }]),
    );
    for (const [method, path] of [
      ['GET', '/api/api-keys'],
      ['POST', '/api/api-keys'],
      ['PATCH', '/api/api-keys/{id}'],
      ['POST', '/api/api-keys/{id}/revoke'],
      ['DELETE', '/api/api-keys/{id}'],
    ] as const)
      expect(checker.operation(method, path).security).toEqual([{ signInToken: [] }]);
    for (const [method, path] of [
      ['GET', '/api/auth/challenge'],
      ['POST', '/api/auth/verify'],
      ['GET', '/api/chain'],
    ] as const)
      expect(checker.operation(method, path).security).toEqual([]);
  });
});
