/**
 * Team invitations waiting for the signed-in user: each names the team, the
 * role and who invited them, with Accept (the team appears in the switcher
 * at once) and Decline. Nothing is shown when there are none.
 */
import { useState } from 'react';
import { failureOf } from '../../api/graphql.js';
import { useMutation, useQuery } from '../../api/hooks.js';
import {
  SettingsAcceptInvitationDocument,
  SettingsDeclineInvitationDocument,
  SettingsInvitationsDocument,
  type SettingsInvitationsQuery,
} from '../../api/generated.js';
import { ErrorAlert } from '../../components/ui.js';
import { formatTime } from '../../format.js';
import { useSession } from '../../session.js';

type Invitation = SettingsInvitationsQuery['me']['invitations'][number];

function InvitationRow({ invitation, onDone }: { invitation: Invitation; onDone(message: string): void }) {
  const { refreshTeams } = useSession();
  const accept = useMutation(SettingsAcceptInvitationDocument);
  const decline = useMutation(SettingsDeclineInvitationDocument);
  const [failure, setFailure] = useState<string | undefined>();
  const pending = accept.pending || decline.pending;

  const answer = async (yes: boolean) => {
    setFailure(undefined);
    const result = yes
      ? (await accept.run({ id: invitation.id }))?.acceptTeamInvitation
      : (await decline.run({ id: invitation.id }))?.declineTeamInvitation;
    if (!result) return;
    const failed = failureOf(result);
    if (failed) return setFailure(failed.message);
    if (yes) await refreshTeams();
    onDone(
      yes ? `You joined ${invitation.teamName} as ${invitation.role.toLowerCase()}.` : `Invitation to ${invitation.teamName} declined.`,
    );
  };

  return (
    <li className="invitation">
      <p>
        <strong>{invitation.teamName}</strong> — as {invitation.role.toLowerCase()}
        {invitation.invitedBy ? `, invited by ${invitation.invitedBy}` : ''} ({formatTime(invitation.createdAt)}; expires{' '}
        {formatTime(invitation.expiresAt)})
      </p>
      <div className="actions">
        <button
          type="button"
          disabled={pending}
          onClick={() => void answer(true)}
          aria-label={`Accept the invitation to ${invitation.teamName}`}
        >
          {accept.pending ? 'Joining…' : 'Accept'}
        </button>
        <button
          type="button"
          className="secondary"
          disabled={pending}
          onClick={() => void answer(false)}
          aria-label={`Decline the invitation to ${invitation.teamName}`}
        >
          Decline
        </button>
      </div>
      <ErrorAlert error={accept.error ?? decline.error} />
      {failure ? (
        <p role="alert" className="alert alert-error">
          {failure}
        </p>
      ) : null}
    </li>
  );
}

export function InvitationsSection({ onNotice }: { onNotice(message: string): void }) {
  const invitations = useQuery(SettingsInvitationsDocument, {});
  const list = invitations.data?.me.invitations ?? [];
  if (list.length === 0 && !invitations.error) return null;
  return (
    <section aria-labelledby="invitations-heading" className="panel">
      <h2 id="invitations-heading">Team invitations</h2>
      <ErrorAlert error={invitations.error} />
      <ul className="invitations">
        {list.map((invitation) => (
          <InvitationRow
            key={invitation.id}
            invitation={invitation}
            onDone={(message) => {
              onNotice(message);
              invitations.reload();
            }}
          />
        ))}
      </ul>
    </section>
  );
}
