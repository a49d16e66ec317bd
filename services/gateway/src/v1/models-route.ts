import type { ModelListJson } from '@svc/api';
import type { RequestHandler } from 'express';
import type { CompletionBackend } from './completion-backend.js';
import { modelJson } from './openai-shapes.js';

/** `GET /v1/models`: the models a worker serves now; none on a server without a backend. */
export function listModelsHandler(backend: CompletionBackend | undefined): RequestHandler {
  return async (_req, res) => {
    const models = backend === undefined ? [] : await backend.listModels();
    const list: ModelListJson = { object: 'list', data: models.map(modelJson) };
    res.json(list);
  };
}
