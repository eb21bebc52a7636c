/**
 * One Secret per endpoint: its engines' token (the engines answer only
 * callers that carry it) and the hub token and W&B API key for the model fetcher. It is also
 * the owner of the endpoint's pods, so deleting it garbage-collects them.
 * Created on the endpoint's first start by whichever gateway gets there
 * first (a 409 means another did: its Secret is read and used).
 */
import { randomBytes } from 'node:crypto';
import { ApiException, type CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { endpointSecret, endpointSecretName, SECRET_KEYS } from './pod-spec.js';

export interface EndpointOwner {
  name: string;
  uid: string;
  token: string;
  hasHubToken: boolean;
  hasWandbKey: boolean;
}

/** The gateway's credentials for model sources that the pods' model fetcher gets through the Secret. */
export interface SourceTokens {
  hubToken?: string | undefined;
  wandbApiKey?: string | undefined;
}

/** Whether a call failed with the API server's `code` (a 404, a 409). */
export const isStatus = (error: unknown, code: number) => error instanceof ApiException && error.code === code;

function ownerOf(secret: V1Secret): EndpointOwner {
  const read = (key: string) => {
    const value = secret.data?.[key];
    return value === undefined ? (secret.stringData?.[key] ?? undefined) : Buffer.from(value, 'base64').toString('utf8');
  };
  const token = read(SECRET_KEYS.engineToken);
  if (!secret.metadata?.uid || !secret.metadata.name || !token) throw new Error('the endpoint Secret has no uid or engine token');
  return {
    name: secret.metadata.name,
    uid: secret.metadata.uid,
    token,
    hasHubToken: read(SECRET_KEYS.hubToken) !== undefined,
    hasWandbKey: read(SECRET_KEYS.wandbApiKey) !== undefined,
  };
}

export class EndpointSecrets {
  /** Owners already read, by endpoint: a Secret is read once per gateway, not once per replica. */
  private readonly known = new Map<string, Promise<EndpointOwner>>();

  constructor(
    private readonly api: CoreV1Api,
    private readonly namespace: string,
    private readonly tokens: SourceTokens,
  ) {}

  ensure(endpointId: string): Promise<EndpointOwner> {
    let owner = this.known.get(endpointId);
    if (!owner) {
      owner = this.readOrCreate(endpointId);
      this.known.set(endpointId, owner);
      owner.catch(() => this.known.delete(endpointId));
    }
    return owner;
  }

  private async readOrCreate(endpointId: string): Promise<EndpointOwner> {
    const name = endpointSecretName(endpointId);
    try {
      return ownerOf(await this.api.readNamespacedSecret({ name, namespace: this.namespace }));
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
    const body = endpointSecret(endpointId, randomBytes(24).toString('base64url'), this.tokens);
    try {
      return ownerOf(await this.api.createNamespacedSecret({ namespace: this.namespace, body }));
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      return ownerOf(await this.api.readNamespacedSecret({ name, namespace: this.namespace }));
    }
  }

  async remove(endpointId: string): Promise<void> {
    this.known.delete(endpointId);
    try {
      await this.api.deleteNamespacedSecret({
        name: endpointSecretName(endpointId),
        namespace: this.namespace,
        propagationPolicy: 'Background',
      });
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
    }
  }
}
