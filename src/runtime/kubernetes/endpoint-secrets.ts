/**
 * One Secret per endpoint: its engines' token (the engines answer only
 * callers that carry it) and the hub token and W&B API key for the model fetcher. It is also
 * the owner of the endpoint's pods, so deleting it garbage-collects them.
 * Created on the endpoint's first start by whichever gateway gets there
 * first (a 409 means another did: its Secret is read and used). A gateway
 * whose source tokens differ from the Secret's (HF_TOKEN or WANDB_API_KEY
 * rotated, set or unset) rewrites them on its first use of the Secret, keeping
 * the engine token, so that the endpoint's next pods fetch with the new ones.
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

/** A key of the Secret, decoded (the server answers `data`; `stringData` only as sent). */
function readKey(secret: V1Secret, key: string): string | undefined {
  const value = secret.data?.[key];
  return value === undefined ? (secret.stringData?.[key] ?? undefined) : Buffer.from(value, 'base64').toString('utf8');
}

function ownerOf(secret: V1Secret): EndpointOwner {
  const token = readKey(secret, SECRET_KEYS.engineToken);
  if (!secret.metadata?.uid || !secret.metadata.name || !token) throw new Error('the endpoint Secret has no uid or engine token');
  return {
    name: secret.metadata.name,
    uid: secret.metadata.uid,
    token,
    hasHubToken: readKey(secret, SECRET_KEYS.hubToken) !== undefined,
    hasWandbKey: readKey(secret, SECRET_KEYS.wandbApiKey) !== undefined,
  };
}

/** Whether the Secret holds exactly the gateway's source tokens (an unset one absent). */
const holdsTokens = (secret: V1Secret, tokens: SourceTokens) =>
  readKey(secret, SECRET_KEYS.hubToken) === (tokens.hubToken || undefined) &&
  readKey(secret, SECRET_KEYS.wandbApiKey) === (tokens.wandbApiKey || undefined);

/** Attempts at a read-then-write of the Secret that lost a race (409) before giving up. */
const SECRET_ATTEMPTS = 10;

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
    const { namespace, tokens } = this;
    for (let attempt = 1; ; attempt++) {
      let secret: V1Secret | undefined;
      try {
        secret = await this.api.readNamespacedSecret({ name, namespace });
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
      }
      try {
        if (!secret) {
          const body = endpointSecret(endpointId, randomBytes(24).toString('base64url'), tokens);
          return ownerOf(await this.api.createNamespacedSecret({ namespace, body }));
        }
        if (holdsTokens(secret, tokens)) return ownerOf(secret);
        // The same Secret (its uid, so its pods' owner, and its engine token), the gateway's tokens, and the version
        // read: a gateway that wrote in between makes this a 409, and the loop reads again.
        const fresh = endpointSecret(endpointId, ownerOf(secret).token, tokens);
        const body: V1Secret = {
          ...fresh,
          metadata: { ...secret.metadata, labels: { ...secret.metadata?.labels, ...fresh.metadata?.labels } },
        };
        return ownerOf(await this.api.replaceNamespacedSecret({ name, namespace, body }));
      } catch (error) {
        if (!isStatus(error, 409) || attempt >= SECRET_ATTEMPTS) throw error;
      }
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
