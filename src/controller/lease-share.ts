/**
 * How the gateways share the endpoints: each live gateway (a member, see leases-repository.ts) takes no more than its
 * share, the endpoints to reconcile divided by the live members, rounded up. A gateway alone takes every endpoint. A
 * gateway that holds more than its share by more than a tenth (another one joined: it held more while alone) hands
 * the excess back (settled endpoints only: see reconcile-loop.ts), but only when every member can adopt its
 * replicas where they run (the same pool: the Kubernetes runtime's cluster and namespace). With the local runtime each
 * gateway is a pool of its own (an engine is a child of the gateway that started it): gateways share the new
 * endpoints, and keep what they hold.
 *
 * Where the runtime follows replicas by shard (the Kubernetes runtime: Runtime.watchShards), the share is not a
 * count but a set of shards (src/domain/shards.ts, `assignShards`): the members of the pool divide its shards
 * evenly, each takes every endpoint of its own shards and none of the others', and hands back (settled ones, as
 * above) those it holds of another's. Each gateway then watches only its shards' pods: the work of following the
 * cluster divides between the gateways, as the endpoints do.
 */

export interface ShareInputs {
  /** Endpoints to reconcile, all gateways together (the interval's listing). */
  endpoints: number;
  /** Other live members. */
  others: number;
  /** Of them, those that place replicas in another pool than this gateway. */
  elsewhere: number;
  /** Leases this gateway holds. */
  held: number;
}

export interface Share {
  /** The endpoints this gateway may hold. */
  share: number;
  /** How many more leases it may take now (null: no bound, it is alone). */
  take: number | null;
  /** How many it should hand back. */
  release: number;
}

export function leaseShare({ endpoints, others, elsewhere, held }: ShareInputs): Share {
  if (others === 0) return { share: endpoints, take: null, release: 0 };
  const share = Math.ceil(endpoints / (others + 1));
  const slack = Math.max(1, Math.floor(share / 10));
  const release = elsewhere === 0 && held > share + slack ? held - share : 0;
  return { share, take: Math.max(0, share - held), release };
}
