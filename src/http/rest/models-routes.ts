/**
 * The OpenAI-compatible routes beside chat, under /dedicated/v1: the models
 * list that OpenAI clients and tools call first (`GET /models`, one
 * `GET /models/{id}`), each model being an endpoint the key may call, and
 * OpenAI's error shape for every other path there, so that OpenAI clients
 * raise their usual exceptions.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { failureOfDomainError, isServerFailure } from '../../domain/errors.js';
import type { CallableModel } from '../../services/chat-access.js';
import type { Services } from '../../services/index.js';
import { authenticateRequest } from '../authenticate.js';
import { sendJson } from '../body.js';
import { failureOf } from '../failures.js';
import { logFailure, requestIdOf, type Log } from '../request-id.js';
import { sendFailure, sendMethodNotAllowed } from './chat-errors.js';

export const OPENAI_PREFIX = '/dedicated/v1/';
const MODELS_PATH = '/dedicated/v1/models';

/** OpenAI's model object; `name` and `status` are extensions (clients ignore them). */
function modelObject(model: CallableModel) {
  return {
    id: model.id,
    object: 'model' as const,
    created: Math.floor(model.createdAt.getTime() / 1000),
    owned_by: model.teamId,
    name: model.name,
    status: model.status,
  };
}

/** Answers GET /dedicated/v1/models[/{id}], or an OpenAI error for any other /dedicated/v1/ path. */
export async function handleOpenAIRoute(req: IncomingMessage, res: ServerResponse, url: URL, services: Services, log: Log): Promise<void> {
  try {
    const path = url.pathname.replace(/\/+$/, '');
    const one = path.startsWith(`${MODELS_PATH}/`) ? path.slice(MODELS_PATH.length + 1) : undefined;
    if (path !== MODELS_PATH && (one === undefined || one === '' || one.includes('/'))) {
      return sendFailure(res, { kind: 'not-found', message: `Unknown request URL: ${req.method} ${url.pathname}.`, code: 'unknown_url' });
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendMethodNotAllowed(res, url.pathname, 'GET');
    }
    const auth = await authenticateRequest(services, req);
    if (auth.type === 'error') return sendFailure(res, failureOfDomainError(auth.error));
    const models = await services.chatAccess.callableModels(auth.value);
    if (one === undefined) return sendJson(res, 200, { object: 'list', data: models.map(modelObject) });
    let id: string;
    try {
      id = decodeURIComponent(one);
    } catch {
      id = one;
    }
    const found = models.find((m) => m.id === id);
    if (!found) {
      const message = `The model '${id}' does not exist or you do not have access to it.`;
      return sendFailure(res, { kind: 'not-found', message, code: 'model_not_found', field: 'model' });
    }
    sendJson(res, 200, modelObject(found));
  } catch (error) {
    const failure = failureOf(error);
    if (isServerFailure(failure)) logFailure(log, requestIdOf(req), `${req.method} ${url.pathname}`, error);
    sendFailure(res, failure);
  }
}
