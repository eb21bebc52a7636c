/**
 * The example overlay's NetworkPolicies (deploy/overlays/example), rendered as manifests.test.ts renders them (which
 * validates every rendered object, these included, against Kubernetes' schemas): the engines' (only the gateways reach
 * them, and they reach no private address) and the gateways' (the API's port from anywhere, the probes' port from
 * nowhere: its 64 places are not anyone's to fill). Their effect is the network plugin's, which no test here runs.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MANAGED_SELECTOR } from '../../src/runtime/kubernetes/pod-spec.js';
import { readKubernetesSettings } from '../../src/runtime/kubernetes/settings.js';
import { schemaProblems } from './k8s-schema.js';
import { kustomize, type K8sObject } from './kustomize.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const rendered = kustomize(path.join(ROOT, 'deploy/overlays/example'));

function named(kind: string, name: string): K8sObject {
  const found = rendered.filter((o) => o.kind === kind && o.metadata.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0]!;
}

const deployment = named('Deployment', 'dedicated-gateway');
const gateway = deployment.spec.template.spec.containers.find((c: any) => c.name === 'gateway');
const envVar = (name: string) => gateway.env.find((e: any) => e.name === name);
const configMap = named('ConfigMap', 'dedicated-gateway');
/** The gateway container's port of that name (`http`: the API, PORT; `health`: the probes, HEALTH_PORT). */
const containerPort = (name: string): number => gateway.ports.find((p: any) => p.name === name).containerPort;

/** Whether an ingress rule admits `port` (a number, or the container port's name); a rule without ports admits every port. */
function admitsPort(rule: any, port: number, name: string): boolean {
  return !rule.ports || rule.ports.some((p: any) => p.port === port || p.port === name || p.port === undefined);
}

/** Whether an ingress rule admits every source: no `from`, or an empty one (what a Service's clients need). */
function fromAnywhere(rule: any): boolean {
  return !rule.from || rule.from.length === 0;
}

describe("the example overlay's network policies", () => {
  it('there are two: the engines’ and the gateways’, both valid against the schemas', () => {
    const policies = rendered.filter((o) => o.kind === 'NetworkPolicy').map((o) => o.metadata.name);
    expect(policies.sort()).toEqual(['dedicated-engines', 'dedicated-gateway']);
    for (const name of policies) expect(schemaProblems(named('NetworkPolicy', name)), name).toEqual([]);
  });

  it('a NetworkPolicy lets only the gateways reach the engine Pods, on their port, and the engines reach no private address', () => {
    const policy = named('NetworkPolicy', 'dedicated-engines');
    const settings = readKubernetesSettings({ ...configMap.data, ENGINE_IMAGE: gateway.image });
    // It selects the Pods the runtime creates (their label), and only those.
    const [key, value] = MANAGED_SELECTOR.split('=');
    expect(policy.spec.podSelector).toEqual({ matchLabels: { [key!]: value } });
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: deployment.spec.selector.matchLabels } }],
        ports: [{ port: settings.enginePort, protocol: 'TCP' }],
      },
    ]);
    // Egress: DNS, and HTTPS to public addresses (PostgreSQL, the gateways and the cloud's metadata are private).
    const [dns, https] = policy.spec.egress;
    expect(dns.ports.map((p: any) => p.port)).toEqual([53, 53]);
    expect(https.ports).toEqual([{ port: 443, protocol: 'TCP' }]);
    const v4 = https.to.find((peer: any) => peer.ipBlock?.cidr === '0.0.0.0/0');
    expect(v4.ipBlock.except).toEqual(expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16']));
    expect(https.to.every((peer: any) => peer.ipBlock && !peer.podSelector && !peer.namespaceSelector)).toBe(true);
    expect(policy.spec.egress).toHaveLength(2);
  });

  it("a NetworkPolicy on the gateway Pods admits the API's port from anywhere, and nothing on the probes' port", () => {
    const policy = named('NetworkPolicy', 'dedicated-gateway');
    expect(policy.metadata.namespace).toBe(deployment.metadata.namespace);
    // It selects the gateway Pods by the Deployment's labels, which their template carries.
    expect(policy.spec.podSelector).toEqual({ matchLabels: deployment.spec.selector.matchLabels });
    expect(deployment.spec.template.metadata.labels).toMatchObject(policy.spec.podSelector.matchLabels);
    // Ingress only: the gateways' own connections (the API server, PostgreSQL, the hub, the engines) are not restricted.
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.egress).toBeUndefined();

    // The API's port: the one PORT names, and the Service's target.
    const api = containerPort('http');
    expect(String(api)).toBe(envVar('PORT').value);
    expect(named('Service', 'dedicated-gateway').spec.ports.map((p: any) => p.targetPort)).toEqual(['http']);
    expect(policy.spec.ingress).toEqual([{ ports: [{ port: api, protocol: 'TCP' }] }]);
    expect(policy.spec.ingress.some((rule: any) => fromAnywhere(rule) && admitsPort(rule, api, 'http'))).toBe(true);

    // The probes' port (HEALTH_PORT): no rule admits it, from anywhere.
    const health = containerPort('health');
    expect(String(health)).toBe(envVar('HEALTH_PORT').value);
    expect(policy.spec.ingress.filter((rule: any) => admitsPort(rule, health, 'health'))).toEqual([]);
  });

  it('the checks above see a policy that would admit the probes’ port: by number, by name, or with no ports at all', () => {
    const health = containerPort('health');
    for (const rule of [{ ports: [{ port: health }] }, { ports: [{ port: 'health' }] }, {}, { ports: [{ protocol: 'TCP' }] }]) {
      expect(admitsPort(rule, health, 'health'), JSON.stringify(rule)).toBe(true);
    }
    expect(admitsPort({ ports: [{ port: containerPort('http') }] }, health, 'health')).toBe(false);
    expect(fromAnywhere({ from: [{ podSelector: {} }] })).toBe(false);
  });
});
