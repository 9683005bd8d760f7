import { render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, setCsrf, type SessionInfo } from './api.ts';
import { LiveContext, type ChatEvent, type Live, type LogLine, type Overview } from './live.ts';
import { SignIn } from './pages/signin.tsx';
import { OverviewPage } from './pages/overview.tsx';
import { ConversationsPage } from './pages/conversations.tsx';
import { AccessPage } from './pages/access.tsx';
import { ApprovalsPage } from './pages/approvals.tsx';
import { MemoryPage } from './pages/memory.tsx';
import { ToolsPage } from './pages/tools.tsx';
import { LogsPage } from './pages/logs.tsx';
import { ConfigPage } from './pages/config.tsx';
import { ChatPage } from './pages/chat.tsx';
import './style.css';

const pages = [
  { id: 'overview', title: 'Overview', view: OverviewPage },
  { id: 'chat', title: 'Chat', view: ChatPage },
  { id: 'conversations', title: 'Conversations', view: ConversationsPage },
  { id: 'access', title: 'People and access', view: AccessPage },
  { id: 'approvals', title: 'Approvals', view: ApprovalsPage },
  { id: 'memory', title: 'Memory', view: MemoryPage },
  { id: 'tools', title: 'Tools', view: ToolsPage },
  { id: 'logs', title: 'Logs', view: LogsPage },
  { id: 'config', title: 'Config', view: ConfigPage },
] as const;

const route = (): string => location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview';

function Shell({ session, onSignOut }: { session: SessionInfo; onSignOut: () => void }) {
  const [page, setPage] = useState(route());
  const [overview, setOverview] = useState<Overview | undefined>(undefined);
  const [connected, setConnected] = useState(false);
  const [menu, setMenu] = useState(false);
  const chat = useRef(new Set<(event: ChatEvent) => void>());
  const logs = useRef(new Set<(line: LogLine) => void>());
  useEffect(() => {
    const onHash = (): void => {
      setPage(route());
      setMenu(false);
    };
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const wantLogs = page === 'logs';
  useEffect(() => {
    const source = new EventSource(`/api/console/stream${wantLogs ? '?logs=1' : ''}`);
    source.onopen = () => setConnected(true);
    source.onerror = () => setConnected(false);
    source.addEventListener('overview', (event) => setOverview(JSON.parse((event as MessageEvent<string>).data) as Overview));
    source.addEventListener('chat', (event) => {
      const data = JSON.parse((event as MessageEvent<string>).data) as ChatEvent;
      for (const listener of chat.current) listener(data);
    });
    source.addEventListener('log', (event) => {
      const data = JSON.parse((event as MessageEvent<string>).data) as LogLine;
      for (const listener of logs.current) listener(data);
    });
    return () => source.close();
  }, [wantLogs]);
  const live: Live = useMemo(
    () => ({
      overview,
      connected,
      onChat: (listener) => {
        chat.current.add(listener);
        return () => chat.current.delete(listener);
      },
      onLog: (listener) => {
        logs.current.add(listener);
        return () => logs.current.delete(listener);
      },
    }),
    [overview, connected],
  );
  const current = pages.find((p) => p.id === page) ?? pages[0];
  const View = current.view;
  useEffect(() => {
    document.title = `${current.title} · Switchboard`;
    document.getElementById('main')?.focus();
  }, [current.id]);
  const signOut = async (): Promise<void> => {
    await api('/api/console/session', { method: 'DELETE' }).catch(() => undefined);
    onSignOut();
  };
  return (
    <LiveContext.Provider value={live}>
      <a class="skip" href="#main" onClick={(e) => { e.preventDefault(); document.getElementById('main')?.focus(); }}>Skip to content</a>
      <header class="top">
        <button class="menu" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>☰<span class="sr">Menu</span></button>
        <span class="brand">Switchboard</span>
        <span class={`dot ${connected ? 'ok' : 'bad'}`} title={connected ? 'live' : 'reconnecting'} aria-label={connected ? 'live updates connected' : 'live updates reconnecting'} role="status" />
        <span class="who">{session.operator}</span>
        {session.tokenRequired ? <button class="link" onClick={() => void signOut()}>Sign out</button> : null}
      </header>
      <div class="layout">
        <nav id="nav" class={menu ? 'open' : ''} aria-label="Pages">
          <ul>
            {pages.map((p) => (
              <li>
                <a href={`#/${p.id}`} aria-current={p.id === current.id ? 'page' : undefined}>{p.title}</a>
              </li>
            ))}
          </ul>
        </nav>
        <main id="main" tabIndex={-1}>
          <h1>{current.title}</h1>
          <View />
        </main>
      </div>
    </LiveContext.Provider>
  );
}

function App() {
  const [session, setSession] = useState<SessionInfo | undefined>(undefined);
  const [error, setError] = useState('');
  const load = (): void => {
    api<SessionInfo>('/api/console/session')
      .then((info) => {
        if (info.csrf) setCsrf(info.csrf);
        setSession(info);
      })
      .catch((e: Error) => setError(e.message));
  };
  useEffect(load, []);
  if (error) return <p class="error" role="alert">The console could not reach the daemon: {error}</p>;
  if (!session) return <p class="boot">Loading…</p>;
  if (!session.signedIn)
    return (
      <SignIn
        tokenRequired={session.tokenRequired}
        onSignedIn={(info) => {
          if (info.csrf) setCsrf(info.csrf);
          setSession(info);
        }}
      />
    );
  return <Shell session={session} onSignOut={() => setSession({ signedIn: false, tokenRequired: session.tokenRequired })} />;
}

render(<App />, document.getElementById('app')!);
