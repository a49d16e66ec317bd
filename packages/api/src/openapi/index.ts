// The OpenAPI 3.1 document of `/v1` and `/api`, generated from the zod schemas (needs zod, like ./schemas),
// and the schemas of what the gateway answers that it is generated from.

export { openApiDocument, type OpenApiDocumentOptions } from './document.js';
export { ROUTES, type RouteSpec } from './routes.js';
export * from './wire-schemas.js';
