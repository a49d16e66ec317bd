import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

// Checks answers of a live gateway against the OpenAPI document it serves: the status is documented for
// the route, the body and the documented headers validate against their schemas (JSON Schema 2020-12, with
// ajv), an error's code is one the response enumerates; and records what was seen, so a test can assert
// that every documented route, status and error code was exercised.

type Json = Record<string, unknown>;

const DOCUMENT_ID = 'urn:svc:openapi';

export interface ObservedAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The raw body. */
  readonly text: string;
}

/** What a route answered, as the coverage counts it: `GET /v1/models 429 rate_limit_exceeded`. */
export type Observation = string;

function isJson(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The `data` of every server-sent event of `raw`, in order. */
export function sseData(raw: string): string[] {
  return raw
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice('data:'.length).replace(/^ /, ''))
        .join('\n'),
    );
}

export class OpenApiChecker {
  readonly seen = new Set<Observation>();
  readonly #ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  readonly #validators = new Map<string, ValidateFunction>();

  constructor(readonly document: Json) {
    this.#ajv.addSchema({ $id: DOCUMENT_ID, components: document.components });
  }

  /** Follows a `$ref` within the document. */
  resolve<T = Json>(value: unknown): T {
    if (isJson(value) && typeof value.$ref === 'string') {
      const path = value.$ref.replace(/^#\//, '').split('/');
      let target: unknown = this.document;
      for (const segment of path) target = (target as Json)[segment.replace(/~1/g, '/').replace(/~0/g, '~')];
      return this.resolve<T>(target);
    }
    return value as T;
  }

  validator(schema: unknown): ValidateFunction {
    const key = JSON.stringify(schema);
    let validate = this.#validators.get(key);
    if (validate === undefined) {
      const rooted = JSON.parse(key.replaceAll('"#/components/', `"${DOCUMENT_ID}#/components/`)) as Json;
      validate = this.#ajv.compile(rooted);
      this.#validators.set(key, validate);
    }
    return validate;
  }

  /** Throws, naming what failed, unless `value` validates against `schema`. */
  expectValid(schema: unknown, value: unknown, what: string): void {
    const validate = this.validator(schema);
    if (!validate(value))
      throw new Error(
        `${what} does not match the document: ${this.#ajv.errorsText(validate.errors)}\n${JSON.stringify(value).slice(0, 2000)}`,
      );
  }

  operation(method: string, path: string): Json {
    const item = (this.document.paths as Json)[path];
    const operation = isJson(item) ? item[method.toLowerCase()] : undefined;
    if (!isJson(operation)) throw new Error(`${method} ${path} is not in the document`);
    return operation;
  }

  /**
   * Checks one answer of `method` `path` (the path template, `/api/api-keys/{id}`) against the document and
   * records it. Returns the parsed JSON body, if any.
   */
  check(method: string, path: string, answer: ObservedAnswer): unknown {
    const what = `${method} ${path} ${answer.status}`;
    const responses = this.operation(method, path).responses as Json;
    const response = this.resolve(responses[String(answer.status)]);
    if (!isJson(response))
      throw new Error(`${what} is not a documented status: ${answer.text.slice(0, 500)}`);

    this.#checkHeaders(what, response, answer.headers);

    const content = response.content as Json | undefined;
    const contentType = answer.headers.get('content-type') ?? '';
    let body: unknown;
    let code: string | null | undefined;
    if (content === undefined) {
      if (answer.text !== '') throw new Error(`${what} has a body the document does not describe`);
    } else if (contentType.startsWith('text/event-stream')) {
      const stream = content['text/event-stream'] as Json | undefined;
      if (stream === undefined) throw new Error(`${what} streamed, which the document does not describe`);
      const events = sseData(answer.text);
      if (events.length === 0) throw new Error(`${what} streamed no event`);
      for (const data of events) {
        const event: unknown = data === '[DONE]' ? data : JSON.parse(data);
        this.expectValid(stream['x-event-data'], event, `an event of ${what}`);
        if (isJson(event) && isJson(event.error)) code = event.error.code as string;
      }
      body = events;
    } else {
      const json = content['application/json'] as Json | undefined;
      if (json === undefined || !contentType.startsWith('application/json'))
        throw new Error(`${what} answered ${contentType}, which the document does not describe`);
      body = JSON.parse(answer.text) as unknown;
      this.expectValid(json.schema, body, `the body of ${what}`);
      if (isJson(body) && 'error' in body)
        code = isJson(body.error) ? (body.error.code as string | null) : (body.error as string);
    }

    const codes = response['x-error-codes'] as (string | null)[] | undefined;
    if (codes !== undefined) {
      if (code === undefined) throw new Error(`${what} carries no error code`);
      if (!codes.includes(code))
        throw new Error(`${what} answered code ${code}, not one of ${codes.join(', ')}`);
      this.seen.add(`${method} ${path} ${answer.status} ${code}`);
    } else {
      this.seen.add(`${method} ${path} ${answer.status}`);
      // A stream that ended with an error event is a documented 200 too.
      if (code !== undefined) this.seen.add(`${method} ${path} ${answer.status} stream ${code}`);
    }
    return body;
  }

  #checkHeaders(what: string, response: Json, headers: Headers): void {
    for (const [name, declared] of Object.entries((response.headers as Json | undefined) ?? {})) {
      const header = this.resolve(declared);
      const value = headers.get(name);
      if (value === null) {
        if (header.required === true) throw new Error(`${what} lacks its documented header ${name}`);
        continue;
      }
      if (isJson(header.schema)) this.expectValid(header.schema, value, `header ${name} of ${what}`);
      if (isJson(header.content))
        this.expectValid(
          (header.content['application/json'] as Json).schema,
          JSON.parse(value),
          `header ${name} of ${what}`,
        );
      if (isJson(header['x-decoded']))
        this.expectValid(
          header['x-decoded'],
          JSON.parse(Buffer.from(value, 'base64').toString('utf8')),
          `the decoded header ${name} of ${what}`,
        );
    }
  }

  /** Whether `body` is one the document says `method` `path` takes (its JSON request body schema). */
  acceptsRequest(method: string, path: string, body: unknown): boolean {
    const requestBody = this.resolve(this.operation(method, path).requestBody);
    const schema = ((requestBody.content as Json)['application/json'] as Json).schema;
    return this.validator(schema)(body) === true;
  }

  /** Whether the document's schema of query parameter `name` of `method` `path` takes `value`. */
  acceptsQuery(method: string, path: string, name: string, value: string): boolean {
    const parameters = (this.operation(method, path).parameters as unknown[]).map((p) => this.resolve(p));
    const parameter = parameters.find((p) => p.in === 'query' && p.name === name);
    if (parameter === undefined) throw new Error(`${method} ${path} has no query parameter ${name}`);
    return this.validator(parameter.schema)(value) === true;
  }

  /** Every route, status and error code the document names, as `check` records them. */
  documented(): Observation[] {
    const all: Observation[] = [];
    for (const [path, item] of Object.entries(this.document.paths as Json))
      for (const [method, operation] of Object.entries(item as Json))
        for (const [status, declared] of Object.entries((operation as Json).responses as Json)) {
          const response = this.resolve(declared);
          const codes = response['x-error-codes'] as (string | null)[] | undefined;
          const prefix = `${method.toUpperCase()} ${path} ${status}`;
          if (codes === undefined) all.push(prefix);
          else for (const code of codes) all.push(`${prefix} ${code}`);
          // Every code a stream error event may carry, on the routes that stream.
          const stream = isJson(response.content)
            ? (response.content['text/event-stream'] as Json)
            : undefined;
          if (stream !== undefined)
            for (const code of this.streamCodes()) all.push(`${prefix} stream ${code}`);
        }
    return all;
  }

  streamCodes(): string[] {
    const event = this.resolve((this.document.components as Json).schemas as Json);
    const error = ((event.StreamErrorEvent as Json).properties as Json).error as Json;
    return ((error.properties as Json).code as Json).enum as string[];
  }
}
