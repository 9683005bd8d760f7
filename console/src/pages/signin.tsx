import { useState } from 'preact/hooks';
import { api, type SessionInfo } from '../api.ts';

export function SignIn({ tokenRequired, onSignedIn }: { tokenRequired: boolean; onSignedIn: (info: SessionInfo) => void }) {
  const [name, setName] = useState('operator');
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault();
    setBusy(true);
    setError('');
    try {
      onSignedIn(await api<SessionInfo>('/api/console/session', { method: 'POST', body: { name: name.trim() || 'operator', token } }));
    } catch (e) {
      setError((e as Error).message);
      setToken('');
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form onSubmit={(e) => void submit(e)} aria-labelledby="signin-title">
        <h1 id="signin-title">Switchboard</h1>
        <p class="muted">{tokenRequired ? 'Sign in with the gateway token ([gateway] token).' : 'This console is open on loopback; say who you are.'}</p>
        <label for="name">Your name <span class="muted">(your person in the browser chat)</span></label>
        <input id="name" name="name" autoComplete="username" value={name} onInput={(e) => setName(e.currentTarget.value)} maxLength={40} required />
        {tokenRequired ? (
          <>
            <label for="token">Gateway token</label>
            <input id="token" name="token" type="password" autoComplete="current-password" value={token} onInput={(e) => setToken(e.currentTarget.value)} required />
          </>
        ) : null}
        {error ? <p class="error" role="alert">{error}</p> : null}
        <button type="submit" class="primary" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </main>
  );
}
