/** Sign-in: an API key, checked against the gateway before it is kept for this tab. */
import { useState, type FormEvent } from 'react';
import { ApiError } from '../api/graphql.js';
import { Field, Notice } from '../components/ui.js';
import { useSessionState } from '../session.js';

export function SignInPage() {
  const { signIn, notice } = useSessionState();
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | undefined>();
  const [pending, setPending] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!key.trim()) return setError('Enter an API key.');
    setPending(true);
    setError(undefined);
    try {
      await signIn(key.trim());
    } catch (failure) {
      setError(
        failure instanceof ApiError && failure.status === 401
          ? 'This API key is not valid or was revoked.'
          : String((failure as Error).message),
      );
    } finally {
      setPending(false);
    }
  };

  return (
    <main className="sign-in" id="main">
      <h1>Dedicated endpoints</h1>
      <form onSubmit={submit} noValidate aria-labelledby="sign-in-title">
        <h2 id="sign-in-title">Sign in</h2>
        {notice && <Notice>{notice}</Notice>}
        <Field
          label="API key"
          name="apiKey"
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={key}
          onChange={(e) => setKey(e.target.value)}
          error={error}
          hint={
            <>
              The key <code>npm start</code> printed at first start, or one from <code>npm run admin -- create-key</code>. It is kept only
              in this tab.
            </>
          }
          autoFocus
        />
        <button type="submit" disabled={pending}>
          {pending ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
