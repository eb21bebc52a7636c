/**
 * The per-endpoint Secret (src/runtime/kubernetes/endpoint-secrets.ts) against the stand-in API server, through the
 * official client: created once with the engines' token and the gateway's source tokens; a gateway whose HF_TOKEN or
 * WANDB_API_KEY changed rewrites them (keeping the Secret, so its pods' owner, and the engines' token); gateways that
 * race on it end with one Secret holding one of their writes, none failing. Also the stand-in's PUT, which the
 * rewrite uses, answering as the API server does.
 */
import { ApiException, CoreV1Api, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EndpointSecrets, type SourceTokens } from '../../src/runtime/kubernetes/endpoint-secrets.js';
import { endpointSecretName, SECRET_KEYS } from '../../src/runtime/kubernetes/pod-spec.js';
import { startKubeStandIn, type KubeStandIn } from '../support/kube/index.js';

const NS = 'default';
let standIn: KubeStandIn;
let core: CoreV1Api;

beforeAll(async () => {
  standIn = await startKubeStandIn({ processes: false, nodes: [] });
  const kc = new KubeConfig();
  kc.loadFromFile(standIn.writeKubeconfig(NS));
  core = kc.makeApiClient(CoreV1Api);
});
afterAll(() => standIn?.close());

/** A gateway's view of the Secrets: a fresh EndpointSecrets is a gateway (re)started with these tokens. */
const gateway = (tokens: SourceTokens) => new EndpointSecrets(core, NS, tokens);

async function stored(endpointId: string): Promise<{ uid: string; keys: Record<string, string> }> {
  const secret = await core.readNamespacedSecret({ name: endpointSecretName(endpointId), namespace: NS });
  const keys = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  return { uid: secret.metadata!.uid!, keys };
}

async function failure(call: Promise<unknown>): Promise<{ code: number; body: { reason: string; message: string } }> {
  try {
    await call;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiException);
    const { code, body } = error as ApiException<string>;
    return { code, body: JSON.parse(body) as { reason: string; message: string } };
  }
  throw new Error('the call succeeded');
}

describe('the endpoint Secret', () => {
  it('is written once with the tokens; a gateway with rotated tokens rewrites them and keeps the Secret and engine token', async () => {
    const first = await gateway({ hubToken: 'hf_old', wandbApiKey: 'wandb_old' }).ensure('ep_rotate');
    const created = await stored('ep_rotate');
    expect(created.keys).toEqual({
      [SECRET_KEYS.engineToken]: first.token,
      [SECRET_KEYS.hubToken]: 'hf_old',
      [SECRET_KEYS.wandbApiKey]: 'wandb_old',
    });
    expect(first).toMatchObject({ uid: created.uid, hasHubToken: true, hasWandbKey: true });

    // The same tokens: read and used as they are (nothing written: the resourceVersion stays).
    const before = await core.readNamespacedSecret({ name: endpointSecretName('ep_rotate'), namespace: NS });
    expect(await gateway({ hubToken: 'hf_old', wandbApiKey: 'wandb_old' }).ensure('ep_rotate')).toEqual(first);
    const after = await core.readNamespacedSecret({ name: endpointSecretName('ep_rotate'), namespace: NS });
    expect(after.metadata!.resourceVersion).toBe(before.metadata!.resourceVersion);

    // HF_TOKEN rotated: the new one is written; the Secret (so its pods' owner) and the engines' token stay.
    const rotated = await gateway({ hubToken: 'hf_new', wandbApiKey: 'wandb_old' }).ensure('ep_rotate');
    expect(rotated).toEqual({ ...first, hasHubToken: true });
    expect((await stored('ep_rotate')).keys).toEqual({
      [SECRET_KEYS.engineToken]: first.token,
      [SECRET_KEYS.hubToken]: 'hf_new',
      [SECRET_KEYS.wandbApiKey]: 'wandb_old',
    });

    // Both unset: the keys go, and the pods are told not to reference them.
    const unset = await gateway({}).ensure('ep_rotate');
    expect(unset).toEqual({ ...first, hasHubToken: false, hasWandbKey: false });
    expect((await stored('ep_rotate')).keys).toEqual({ [SECRET_KEYS.engineToken]: first.token });
    expect((await stored('ep_rotate')).uid).toBe(created.uid);
  });

  it('gateways racing with different tokens all succeed, and the Secret ends holding one of their writes whole', async () => {
    const owner = await gateway({ hubToken: 'hf_0' }).ensure('ep_race');
    const tokens = Array.from({ length: 6 }, (_, i) => `hf_${i + 1}`);
    const owners = await Promise.all(tokens.map((hubToken) => gateway({ hubToken }).ensure('ep_race')));
    for (const o of owners) expect(o).toEqual(owner);
    const final = await stored('ep_race');
    expect(final.uid).toBe(owner.uid);
    expect(final.keys[SECRET_KEYS.engineToken]).toBe(owner.token);
    expect(tokens).toContain(final.keys[SECRET_KEYS.hubToken]);
  });

  it('gateways racing on a Secret that does not exist yet share the one created', async () => {
    const owners = await Promise.all(Array.from({ length: 6 }, () => gateway({ hubToken: 'hf_same' }).ensure('ep_new')));
    expect(new Set(owners.map((o) => `${o.uid}/${o.token}`)).size).toBe(1);
  });
});

describe("the stand-in's PUT of a Secret", () => {
  const body = (name: string, extra: Partial<V1Secret['metadata']> = {}): V1Secret => ({
    metadata: { name, ...extra },
    stringData: { k: 'v2' },
  });

  it('replaces the data and keeps the identity; a stale resourceVersion is 409, a wrong name 400, a missing object 404', async () => {
    const made = await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 's-put' }, stringData: { k: 'v1', gone: 'x' } },
    });
    const replaced = await core.replaceNamespacedSecret({
      name: 's-put',
      namespace: NS,
      body: body('s-put', { resourceVersion: made.metadata!.resourceVersion! }),
    });
    expect(replaced.metadata!.uid).toBe(made.metadata!.uid);
    expect(Number(replaced.metadata!.resourceVersion)).toBeGreaterThan(Number(made.metadata!.resourceVersion));
    expect(replaced.data).toEqual({ k: Buffer.from('v2').toString('base64') });

    const stale = await failure(
      core.replaceNamespacedSecret({
        name: 's-put',
        namespace: NS,
        body: body('s-put', { resourceVersion: made.metadata!.resourceVersion! }),
      }),
    );
    expect(stale.code).toBe(409);
    expect(stale.body.reason).toBe('Conflict');
    expect(stale.body.message).toMatch(/the object has been modified/);

    const misnamed = await failure(core.replaceNamespacedSecret({ name: 's-put', namespace: NS, body: body('other') }));
    expect(misnamed.code).toBe(400);
    expect(misnamed.body.message).toMatch(/does not match the name on the URL/);

    const missing = await failure(core.replaceNamespacedSecret({ name: 's-none', namespace: NS, body: body('s-none') }));
    expect(missing.code).toBe(404);

    // No resourceVersion: an unconditional update.
    expect((await core.replaceNamespacedSecret({ name: 's-put', namespace: NS, body: body('s-put') })).metadata!.uid).toBe(
      made.metadata!.uid,
    );
  });
});
