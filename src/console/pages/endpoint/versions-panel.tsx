/**
 * The version history, newest first, ten at a time: each version's comment,
 * what changed from the version before it, and a Rollback button on older
 * versions (enabled where the lifecycle allows a rollback from the live status).
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { isAllowed, type EndpointStatus } from '../../../domain/lifecycle.js';
import { PAGE_LIMIT } from '../../../domain/page-limit.js';
import { ApiError, failureOf } from '../../api/graphql.js';
import { useMutation } from '../../api/hooks.js';
import { EndpointPageRollbackDocument, EndpointPageVersionsDocument, type EndpointPageVersionsQuery } from '../../api/generated.js';
import { ErrorAlert, Loading, Notice } from '../../components/ui.js';
import { useSession } from '../../session.js';
import { diffSpecs } from './spec-diff.js';
import { formatTime } from '../../format.js';
import { humanize } from './format.js';

/** Versions shown at first, and added by each "Show older versions" (read from the server page by page). */
const PAGE_SIZE = 10;

type Version = NonNullable<EndpointPageVersionsQuery['endpoint']>['versions']['nodes'][number];

function VersionDiff({ version, previous }: { version: Version; previous: Version | undefined }) {
  if (version.versionIndex === 0) return <p className="muted small">The first version.</p>;
  if (!previous) return <p className="muted small">Load more to compare with version {version.versionIndex - 1}.</p>;
  const changes = diffSpecs(previous.spec, version.spec);
  if (changes.length === 0) return <p className="muted small">No change from version {previous.versionIndex}.</p>;
  return (
    <div className="version-diff">
      <p className="small">Changes from version {previous.versionIndex}:</p>
      <ul aria-label={`Changes in version ${version.versionIndex}`}>
        {changes.map((change) => (
          <li key={change.field}>
            <span className="diff-field">{change.field}</span>: <del>{change.before}</del> <span aria-hidden="true">→</span>
            <span className="visually-hidden">to</span> <ins>{change.after}</ins>
          </li>
        ))}
      </ul>
    </div>
  );
}

export function VersionsPanel({
  id,
  status,
  currentVersion,
  generation,
  onRolledBack,
}: {
  id: string;
  status: string;
  currentVersion: number;
  /** Changes when a version was added: the history reloads from the top. */
  generation: number;
  onRolledBack: () => void;
}) {
  const { api } = useSession();
  // Newest first, as the server pages them; one more than shown, so that the oldest shown has its predecessor to diff.
  const [versions, setVersions] = useState<Version[]>([]);
  const [shown, setShown] = useState(PAGE_SIZE);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<ApiError | undefined>();
  const rollback = useMutation(EndpointPageRollbackDocument);
  const [rollbackFailure, setRollbackFailure] = useState<string | undefined>();
  const [done, setDone] = useState<string | undefined>();

  /** Reads the next page towards older versions (from the newest when `after` is null). */
  const fetchPage = useCallback(
    async (after: string | null, count: number): Promise<{ nodes: Version[]; next: string | null }> => {
      const result: EndpointPageVersionsQuery = await api.request(EndpointPageVersionsDocument, { id, first: count, after });
      const connection = result.endpoint?.versions;
      if (!connection) return { nodes: [], next: null };
      return { nodes: connection.nodes, next: connection.pageInfo.hasNextPage ? connection.pageInfo.endCursor : null };
    },
    [api, id],
  );

  // How many versions the user asked to see; which read of the list is the latest (only the latest is shown, and
  // only its failure: a read from the top that a new version started while an older page was read keeps what was
  // asked, and wins); and whether a read from the top is under way.
  const wanted = useRef(PAGE_SIZE);
  const reads = useRef(0);
  const reloading = useRef(0);

  /** Runs a read of the list as the latest: what it shows, its failure and the end of loading count only while it is. */
  const latest = useCallback((work: (isLatest: () => boolean) => Promise<void>) => {
    const read = ++reads.current;
    const isLatest = () => read === reads.current;
    setLoading(true);
    void work(isLatest)
      .then(
        () => isLatest() && setError(undefined),
        (failure: unknown) => isLatest() && setError(failure instanceof ApiError ? failure : new ApiError(String(failure))),
      )
      .finally(() => isLatest() && setLoading(false));
  }, []);

  // From the top, as many as asked for (older versions the user opened stay open), up to what one page may hold; one
  // more is read to diff the oldest shown.
  const reload = useCallback(() => {
    reloading.current++;
    latest(async (isLatest) => {
      try {
        const keep = Math.min(wanted.current, PAGE_LIMIT.max - 1);
        const page = await fetchPage(null, keep + 1);
        if (!isLatest()) return;
        setVersions(page.nodes);
        setCursor(page.next);
        setShown(keep);
      } finally {
        reloading.current--;
      }
    });
  }, [fetchPage, latest]);

  // Again whenever a version is added or rolled out.
  useEffect(() => reload(), [reload, generation]);

  const showOlder = () => {
    // Two clicks before the list shows the first ask for two pages more.
    wanted.current = Math.max(wanted.current, shown) + PAGE_SIZE;
    // Within one page: read again from the top (one read, nothing to join).
    if (wanted.current < PAGE_LIMIT.max) return reload();
    // Past it, the next page is added to the list as shown; not while a read from the top replaces that list (its
    // cursor is the one to follow: a click then asks again once it shows).
    if (reloading.current > 0) return;
    latest(async (isLatest) => {
      if (cursor && versions.length < shown + PAGE_SIZE + 1) {
        const page = await fetchPage(cursor, PAGE_SIZE);
        if (!isLatest()) return;
        setVersions((current) => [...current, ...page.nodes]);
        setCursor(page.next);
      }
      if (isLatest()) setShown((n) => n + PAGE_SIZE);
    });
  };

  const rollBack = async (versionIndex: number) => {
    setRollbackFailure(undefined);
    setDone(undefined);
    const result = await rollback.run({ id, versionIndex });
    if (!result) return;
    const failed = failureOf(result.rollbackEndpoint);
    if (failed) {
      const fields = failed.fields?.map((f) => `${f.field}: ${f.message}`).join('; ');
      return setRollbackFailure(fields ? `${failed.message} (${fields})` : failed.message);
    }
    setDone(`Rolled back to version ${versionIndex}: a new version copies it.`);
    onRolledBack();
  };

  const canRollBack = isAllowed('rollback', status as EndpointStatus);
  const byIndex = new Map(versions.map((v) => [v.versionIndex, v]));
  // Every update and rollback appends a version, which becomes the current one.
  const newest = Math.max(currentVersion, versions[0]?.versionIndex ?? 0);

  return (
    <section className="panel" aria-labelledby="versions-heading">
      <h2 id="versions-heading">Versions</h2>
      <ErrorAlert error={error} />
      <ErrorAlert error={rollbackFailure ?? rollback.error} />
      {done && <Notice>{done}</Notice>}
      {versions.length === 0 && loading && <Loading what="the versions" />}
      <ol className="versions" aria-label="Version history">
        {versions.slice(0, shown).map((version) => (
          <li key={version.versionIndex} className="version" data-version={version.versionIndex}>
            <div className="version-head">
              <h3>Version {version.versionIndex}</h3>
              {version.versionIndex === newest && <span className="badge badge-ok">current</span>}
              <span className="muted small">{humanize(version.rolloutState)}</span>
              {version.rolledBackFrom !== null && <span className="small">rollback to version {version.rolledBackFrom}</span>}
            </div>
            <p className="small muted">
              <time dateTime={version.createdAt}>{formatTime(version.createdAt)}</time>
              {version.creator && <> · {version.creator.name || version.creator.email}</>}
            </p>
            {version.comment && <p className="version-comment">{version.comment}</p>}
            <VersionDiff version={version} previous={byIndex.get(version.versionIndex - 1)} />
            {version.versionIndex !== newest && (
              <button
                type="button"
                className="secondary"
                disabled={!canRollBack || rollback.pending}
                aria-label={`Roll back to version ${version.versionIndex}`}
                onClick={() => void rollBack(version.versionIndex)}
              >
                Rollback
              </button>
            )}
          </li>
        ))}
      </ol>
      {/* Not disabled while a read runs: a new version's reload from the top comes any time, and a click then is
          not lost (each read reads what was asked; the latest wins). */}
      {(versions.length > shown || cursor !== null) && (
        <button type="button" className="secondary" aria-busy={loading} onClick={showOlder}>
          Show older versions
        </button>
      )}
    </section>
  );
}
