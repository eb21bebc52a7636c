/**
 * API keys: the caller's keys (active and revoked), a form that creates one
 * and shows its secret once, in a panel the user dismisses, and revoking
 * with an inline confirmation. Revoking the key this console is signed in
 * with ends the session (the API client signs out on 401), so the
 * confirmation says so when the key's prefix matches.
 */
import { useEffect, useRef, useState, type FormEvent } from 'react';
import { failureOf } from '../../api/graphql.js';
import { useMutation, useQuery } from '../../api/hooks.js';
import {
  SettingsApiKeysDocument,
  SettingsCreateApiKeyDocument,
  SettingsRevokeApiKeyDocument,
  type SettingsApiKeysQuery,
} from '../../api/generated.js';
import { ErrorAlert, Field, Loading } from '../../components/ui.js';
import { formatTime } from '../../format.js';
import { useSession } from '../../session.js';
import { InvitationsSection } from './invitations.js';
import './settings.css';

type ApiKey = SettingsApiKeysQuery['me']['apiKeys'][number];

/** A key's time, or 'Never' for one that has not happened (a key never used). */
function timeOrNever(value: string | null | undefined): string {
  return value ? formatTime(value) : 'Never';
}

/** The new key's secret, shown once: a read-only field, a Copy button and a way to hide it. */
function SecretPanel({ name, secret, onDismiss }: { name: string; secret: string; onDismiss(): void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<string | undefined>();
  useEffect(() => heading.current?.focus(), []);

  const copy = async () => {
    try {
      if (!navigator.clipboard) throw new Error('no clipboard');
      await navigator.clipboard.writeText(secret);
      setCopied('Copied to the clipboard.');
    } catch {
      // No clipboard access (an insecure origin, or refused): select the text for the user to copy.
      input.current?.focus();
      input.current?.select();
      setCopied('The key is selected: press Ctrl+C (⌘C on a Mac) to copy it.');
    }
  };

  return (
    <section className="panel secret-panel" aria-labelledby="new-key-heading">
      <h2 id="new-key-heading" tabIndex={-1} ref={heading}>
        Your new key “{name}”
      </h2>
      <p className="secret-warning">
        <strong>Copy it now: it will not be shown again.</strong> Only a hash of it is stored; if you lose it, create another key.
      </p>
      <div className="field">
        <label htmlFor="new-key-secret">New API key</label>
        <input
          id="new-key-secret"
          ref={input}
          className="secret-value"
          readOnly
          value={secret}
          spellCheck={false}
          autoComplete="off"
          onFocus={(e) => e.currentTarget.select()}
        />
      </div>
      <div className="actions">
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
        <button type="button" className="secondary" onClick={onDismiss}>
          Done, hide the key
        </button>
      </div>
      <p role="status" className="hint copy-status">
        {copied}
      </p>
    </section>
  );
}

function CreateKeyForm({ onCreated }: { onCreated(created: { name: string; secret: string }): void }) {
  const create = useMutation(SettingsCreateApiKeyDocument);
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string | undefined>();
  const [failure, setFailure] = useState<string | undefined>();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setFailure(undefined);
    if (!name.trim()) {
      setNameError('Give the key a name, to tell it apart later.');
      return;
    }
    setNameError(undefined);
    const result = await create.run({ name: name.trim() });
    if (!result) return;
    const payload = result.createApiKey;
    const failed = failureOf(payload);
    if (failed) {
      const fieldError = failed.fields?.find((f) => f.field === 'name')?.message;
      if (fieldError) setNameError(fieldError);
      else setFailure(failed.message);
      return;
    }
    if (payload.__typename !== 'CreateApiKeySuccess') return;
    setName('');
    onCreated({ name: payload.apiKey.name, secret: payload.secret });
  };

  return (
    <section className="panel" aria-labelledby="create-key-heading">
      <h2 id="create-key-heading">Create a key</h2>
      <form onSubmit={(e) => void submit(e)} noValidate>
        <ErrorAlert error={create.error ?? failure} />
        <div className="create-key-row">
          <Field
            label="Key name"
            hint="What the key is for, e.g. “laptop” or “CI”."
            value={name}
            onChange={(e) => setName(e.target.value)}
            error={nameError}
            maxLength={200}
            autoComplete="off"
          />
          <button type="submit" disabled={create.pending}>
            {create.pending ? 'Creating…' : 'Create key'}
          </button>
        </div>
      </form>
    </section>
  );
}

function KeyRow({ apiKey, onRevoked }: { apiKey: ApiKey; onRevoked(): void }) {
  const revoke = useMutation(SettingsRevokeApiKeyDocument);
  const { isSessionKey } = useSession();
  const [confirming, setConfirming] = useState(false);
  const [failure, setFailure] = useState<string | undefined>();
  const confirmButton = useRef<HTMLButtonElement>(null);
  const revokeButton = useRef<HTMLButtonElement>(null);
  const isCurrent = isSessionKey(apiKey.prefix);

  useEffect(() => {
    if (confirming) confirmButton.current?.focus();
  }, [confirming]);

  const cancel = () => {
    setConfirming(false);
    // Back to the button that opened the confirmation.
    requestAnimationFrame(() => revokeButton.current?.focus());
  };

  const confirm = async () => {
    setFailure(undefined);
    const result = await revoke.run({ id: apiKey.id });
    if (!result) return;
    const failed = failureOf(result.revokeApiKey);
    if (failed) {
      setFailure(failed.message);
      return;
    }
    setConfirming(false);
    onRevoked();
  };

  const revoked = Boolean(apiKey.revokedAt);
  return (
    <>
      <tr className={revoked ? 'key-revoked' : undefined} data-key-id={apiKey.id}>
        <th scope="row">{apiKey.name}</th>
        <td>
          <code>{apiKey.prefix}…</code>
          {isCurrent && <span className="hint"> (this session)</span>}
        </td>
        <td>{timeOrNever(apiKey.createdAt)}</td>
        <td>{timeOrNever(apiKey.lastUsedAt)}</td>
        <td>
          {revoked ? (
            <span className="badge badge-bad">Revoked {timeOrNever(apiKey.revokedAt)}</span>
          ) : (
            <span className="badge badge-ok">Active</span>
          )}
        </td>
        <td>
          {!revoked && !confirming && (
            <button
              type="button"
              className="secondary"
              ref={revokeButton}
              onClick={() => setConfirming(true)}
              aria-label={`Revoke ${apiKey.name}`}
            >
              Revoke
            </button>
          )}
        </td>
      </tr>
      {confirming && (
        <tr className="confirm-row">
          <td colSpan={6}>
            <div className="confirm" role="group" aria-labelledby={`revoke-${apiKey.id}`}>
              <p id={`revoke-${apiKey.id}`}>
                Revoke “{apiKey.name}” (<code>{apiKey.prefix}…</code>)? Anything that uses it stops working at once; this cannot be undone.
              </p>
              {isCurrent ? (
                <p className="secret-warning">
                  <strong>This console is signed in with this key:</strong> revoking it signs you out.
                </p>
              ) : (
                <p className="hint">If this console is signed in with this key, revoking it signs you out.</p>
              )}
              <ErrorAlert error={revoke.error ?? failure} />
              <div className="actions">
                <button type="button" className="danger" ref={confirmButton} disabled={revoke.pending} onClick={() => void confirm()}>
                  {revoke.pending ? 'Revoking…' : `Yes, revoke ${apiKey.name}`}
                </button>
                <button type="button" className="secondary" onClick={cancel} disabled={revoke.pending}>
                  Cancel
                </button>
              </div>
            </div>
          </td>
        </tr>
      )}
    </>
  );
}

export function SettingsPage() {
  const keys = useQuery(SettingsApiKeysDocument, {});
  const [created, setCreated] = useState<{ name: string; secret: string } | undefined>();
  const [notice, setNotice] = useState<string | undefined>();
  const keysHeading = useRef<HTMLHeadingElement>(null);
  const list = keys.data?.me.apiKeys ?? [];
  const sorted = [...list].sort(
    (a, b) => Number(Boolean(a.revokedAt)) - Number(Boolean(b.revokedAt)) || b.createdAt.localeCompare(a.createdAt),
  );

  return (
    <div className="settings-page">
      <h1>API keys</h1>
      <p className="hint">
        A key signs in to this console and calls the API (<code>Authorization: Bearer &lt;key&gt;</code>). Each key acts as you.
      </p>
      {created ? (
        <SecretPanel
          key={created.secret}
          name={created.name}
          secret={created.secret}
          onDismiss={() => {
            setCreated(undefined);
            setNotice('The key is hidden. It is listed below by its prefix.');
          }}
        />
      ) : (
        <CreateKeyForm
          onCreated={(value) => {
            setNotice(undefined);
            setCreated(value);
            keys.reload();
          }}
        />
      )}
      <div role="status" className={notice ? 'alert alert-info' : 'visually-hidden'}>
        {notice}
      </div>
      <InvitationsSection onNotice={setNotice} />

      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading" tabIndex={-1} ref={keysHeading}>
          Your keys
        </h2>
        <ErrorAlert error={keys.error} />
        {keys.loading && !keys.data ? (
          <Loading what="your keys" />
        ) : list.length === 0 ? (
          <p>No keys yet.</p>
        ) : (
          <div className="table-wrap">
            <table className="keys-table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Prefix</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Status</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {sorted.map((apiKey) => (
                  <KeyRow
                    key={apiKey.id}
                    apiKey={apiKey}
                    onRevoked={() => {
                      setNotice(`Key “${apiKey.name}” revoked.`);
                      keys.reload();
                      keysHeading.current?.focus();
                    }}
                  />
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
