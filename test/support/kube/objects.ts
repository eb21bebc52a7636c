/**
 * Shared pieces of the Kubernetes stand-in: the `Status` bodies the API server answers errors with, the error type
 * the handlers throw to produce them, resource quantities ("500m", "16Gi") and small object helpers.
 *
 * Objects are kept as the plain JSON the API server would store: the stand-in never exposes its own classes on the
 * wire, so what a client reads is exactly what it would read from a real cluster for the same requests.
 */
import { randomBytes, randomUUID } from 'node:crypto';

/** A stored API object: JSON as served, `metadata` always present. */
export type KubeObject = { metadata: Record<string, any>; [field: string]: any };

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

/** The `Status` object (apiVersion v1) of a failed request, as kube-apiserver writes it. */
export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: { name?: string; group?: string; kind?: string; uid?: string; causes?: StatusCause[] };
  code: number;
}

/** Thrown by handlers; the server answers it with its `Status` body and code. */
export class ApiError extends Error {
  constructor(readonly status: StatusBody) {
    super(status.message);
  }
}

export function failure(code: number, reason: string, message: string, details?: StatusBody['details']): StatusBody {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

export const notFound = (resource: string, name: string) =>
  new ApiError(failure(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource }));

export const alreadyExists = (resource: string, name: string) =>
  new ApiError(failure(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource }));

export const badRequest = (message: string) => new ApiError(failure(400, 'BadRequest', message));

/** 422 Invalid: `Pod "x" is invalid: [cause, cause]` (one cause is written without brackets). */
export function invalid(kind: string, name: string, causes: StatusCause[]): ApiError {
  const texts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const summary = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  return new ApiError(failure(422, 'Invalid', `${kind} "${name}" is invalid: ${summary}`, { name, kind, causes }));
}

/** The body of a successful DELETE of an object that is gone at once (everything but pods). */
export function deletedStatus(resource: string, name: string, uid: string): StatusBody {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name, kind: resource, uid }, code: 200 };
}

export const newUid = (): string => randomUUID();

/** RFC 3339 with second precision, as metav1.Time serialises. */
export const timestamp = (at = Date.now()): string => new Date(Math.floor(at / 1000) * 1000).toISOString().replace('.000Z', 'Z');

/** `generateName` suffix: five characters from the alphabet apimachinery's rand.String uses. */
export function nameSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return [...randomBytes(5)].map((b) => alphabet[b % alphabet.length]).join('');
}

/** A deep copy of a JSON object, as the API server's storage round trip makes one (undefined fields are dropped). */
export const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E))?$/;
const SUFFIX: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** The value of a resource quantity, or undefined when it is not one. Numbers are accepted as the JSON decoder does. */
export function parseQuantity(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = QUANTITY.exec(value.trim());
  if (!match) return undefined;
  const base = Number(match[1]);
  if (match[2]) return base * 10 ** Number(match[2].slice(1));
  return base * (match[3] ? SUFFIX[match[3]]! : 1);
}

/** A value at a dotted path (`spec.nodeName`, `involvedObject.name`). */
export function pathValue(object: unknown, path: string): unknown {
  let value: any = object;
  for (const part of path.split('.')) value = value == null ? undefined : value[part];
  return value;
}

export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}
