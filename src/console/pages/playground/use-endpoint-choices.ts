/**
 * The endpoints the playground can talk to: the team's, plus the one the URL
 * names when it is not among them (another team's, shared with the caller),
 * each with its status as its subscription last reported it.
 */
import { useMemo, useState } from 'react';
import { useQuery } from '../../api/hooks.js';
import { PlaygroundEndpointDocument, PlaygroundEndpointsDocument } from '../../api/generated.js';
import { useSession } from '../../session.js';
import type { EndpointChoice } from './chat-model.js';

export function useEndpointChoices(id: string | undefined) {
  const { team } = useSession();
  const list = useQuery(PlaygroundEndpointsDocument, { teamId: team?.id ?? '' }, { skip: !team });
  const inTeam = useMemo<EndpointChoice[]>(
    () =>
      list.data?.team?.projects.flatMap((project) =>
        project.endpoints.nodes.map((e) => ({ id: e.id, name: e.name, projectName: project.name, status: e.status.status })),
      ) ?? [],
    [list.data],
  );
  const listed = inTeam.some((e) => e.id === id);
  // An endpoint named by the URL that is not among the team's (another team's, shared with the caller): read it alone.
  const single = useQuery(PlaygroundEndpointDocument, { id: id ?? '' }, { skip: !id || list.loading || listed });
  // The picked endpoint's status as its subscription reports it, over what the list read.
  const [liveStatus, setLiveStatus] = useState<Record<string, string>>({});
  const endpoints = useMemo<EndpointChoice[]>(() => {
    const extra = single.data?.endpoint;
    const all =
      !extra || inTeam.some((e) => e.id === extra.id)
        ? inTeam
        : [{ id: extra.id, name: extra.name, projectName: extra.project.name, status: extra.status.status }, ...inTeam];
    return all.map((e) => (liveStatus[e.id] ? { ...e, status: liveStatus[e.id]! } : e));
  }, [inTeam, single.data, liveStatus]);
  const selected = endpoints.find((e) => e.id === id);
  const unknownId = id !== undefined && !list.loading && !single.loading && !selected && !list.error;
  const setStatus = (endpointId: string, status: string) =>
    setLiveStatus((all) => (all[endpointId] === status ? all : { ...all, [endpointId]: status }));
  return { id, list, single, endpoints, selected, unknownId, setStatus };
}

export type EndpointChoices = ReturnType<typeof useEndpointChoices>;
