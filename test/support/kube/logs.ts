/**
 * `GET /api/v1/namespaces/{ns}/pods/{name}/log`: the container's output as text/plain, with the API server's and
 * kubelet's 400 answers for a pod that has no node yet, an unknown or unnamed container, and a container that has
 * not started (`container "engine" in pod "x" is waiting to start: PodInitializing`). `follow=true` streams until
 * the container ends; `tailLines` and `limitBytes` cut the answer as the kubelet does.
 */
import type { ServerResponse } from 'node:http';
import type { ContainerRun } from './kubelet.js';
import { badRequest, type KubeObject } from './objects.js';

export function serveLogs(
  res: ServerResponse,
  pod: KubeObject,
  query: URLSearchParams,
  find: (uid: string, name: string) => ContainerRun | undefined,
): void {
  const name: string = pod.metadata.name;
  const containers: string[] = pod.spec.containers.map((c: any) => c.name);
  const inits: string[] = (pod.spec.initContainers ?? []).map((c: any) => c.name);
  let container = query.get('container') ?? '';
  if (container === '') {
    if (containers.length !== 1) {
      const more = inits.length ? ` or one of the init containers: [${inits.join(' ')}]` : '';
      throw badRequest(`a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]${more}`);
    }
    container = containers[0]!;
  }
  if (!containers.includes(container) && !inits.includes(container))
    throw badRequest(`container ${container} is not valid for pod ${name}`);
  if (!pod.spec.nodeName) throw badRequest(`pod ${name} does not have a host assigned`);
  const statuses: any[] = [...(pod.status.initContainerStatuses ?? []), ...(pod.status.containerStatuses ?? [])];
  const status = statuses.find((s) => s.name === container);
  if (query.get('previous') === 'true') throw badRequest(`previous terminated container "${container}" in pod "${name}" not found`);
  const waiting = status?.state?.waiting;
  const run = find(pod.metadata.uid, container);
  if (!status || waiting || !run) {
    const reason: string = waiting?.reason ?? 'ContainerCreating';
    const detail =
      reason === 'ErrImagePull' ? "image can't be pulled" : reason === 'ImagePullBackOff' ? 'trying and failing to pull image' : reason;
    throw badRequest(`container "${container}" in pod "${name}" is waiting to start: ${detail}`);
  }
  const tailText = query.get('tailLines');
  const tail = tailText === null ? undefined : Number(tailText);
  if (tail !== undefined && !(Number.isInteger(tail) && tail >= 0))
    throw badRequest(`tailLines: Invalid value: ${tailText}: must be greater than or equal to 0`);
  const limitText = query.get('limitBytes');
  let budget = limitText === null ? Infinity : Number(limitText);
  if (!(budget > 0)) throw badRequest(`limitBytes: Invalid value: ${limitText}: must be greater than 0`);
  res.writeHead(200, { 'Content-Type': 'text/plain', 'Cache-Control': 'no-cache, private' });
  const write = (chunk: Buffer): boolean => {
    if (budget <= 0) return false;
    const part = chunk.length > budget ? chunk.subarray(0, budget) : chunk;
    budget -= part.length;
    res.write(part);
    return budget > 0;
  };
  const more = write(Buffer.from(run.output.tail(tail)));
  if (query.get('follow') !== 'true' || !more) {
    res.end();
    return;
  }
  res.flushHeaders();
  const stop = run.output.follow(
    (chunk) => {
      if (!write(chunk)) {
        stop();
        res.end();
      }
    },
    () => res.end(),
  );
  res.once('close', stop);
}
