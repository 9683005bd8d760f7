import { useEffect, useState } from 'preact/hooks';
import { ago, api, postAction } from '../api.ts';

interface Entry {
  id: string;
  key: string;
  content: string;
  category: string;
  scope: string;
  owner: string;
  updatedAt: number;
  score?: number;
}

export function MemoryPage() {
  const [person, setPerson] = useState('');
  const [q, setQ] = useState('');
  const [data, setData] = useState<{ backend: string; people: string[]; entries: Entry[] } | undefined>(undefined);
  const [editing, setEditing] = useState<{ id: string; content: string } | undefined>(undefined);
  const [shared, setShared] = useState('');
  const [message, setMessage] = useState('');
  const load = (): void => {
    const params = new URLSearchParams();
    if (person === '(shared)') params.set('scope', 'shared');
    else if (person) params.set('person', person);
    if (q.trim()) params.set('q', q.trim());
    void api<typeof data>(`/api/console/memory?${params}`).then(setData).catch((e: Error) => setMessage(e.message));
  };
  useEffect(load, [person]);
  const post = (path: string, body: unknown, done: string): Promise<void> => postAction(path, body, done, setMessage, load);
  const exportHref = `/api/console/memory/export${person && person !== '(shared)' ? `?person=${encodeURIComponent(person)}` : ''}`;
  return (
    <>
      <form class="toolbar" onSubmit={(e) => { e.preventDefault(); load(); }}>
        <label for="mem-person">Person</label>
        <select id="mem-person" value={person} onChange={(e) => setPerson(e.currentTarget.value)}>
          <option value="">Everyone</option>
          <option value="(shared)">Shared memories</option>
          {data?.people.map((p) => <option value={p}>{p}</option>)}
        </select>
        <label for="mem-q">Search</label>
        <input id="mem-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} placeholder={person && person !== '(shared)' ? 'as the agent recalls for them' : 'keywords'} />
        <button type="submit">Search</button>
        <a class="button" href={exportHref} download>Export JSON</a>
      </form>
      <p role="status" class={message ? 'notice' : 'sr'}>{message}</p>
      {!data ? <p class="muted">Loading…</p> : data.entries.length === 0 ? <p class="muted">No memories here.</p> : (
        <ul class="memories">
          {data.entries.map((entry) => (
            <li class="card" data-key={entry.key}>
              <div class="card-head">
                <code class="small">{entry.key}</code>
                <span class="muted small">{entry.scope}{entry.owner ? ` · ${entry.owner}` : ''} · {entry.category} · {ago(entry.updatedAt)}{entry.score !== undefined ? ` · score ${entry.score.toFixed(2)}` : ''}</span>
              </div>
              {editing?.id === entry.id ? (
                <form onSubmit={(e) => { e.preventDefault(); void post('/api/console/memory/edit', { id: entry.id, content: editing.content }, 'Saved').then(() => setEditing(undefined)); }}>
                  <label for={`edit-${entry.id}`} class="sr">Memory text</label>
                  <textarea id={`edit-${entry.id}`} rows={3} value={editing.content} onInput={(e) => setEditing({ id: entry.id, content: e.currentTarget.value })} />
                  <button type="submit" class="primary">Save</button> <button type="button" onClick={() => setEditing(undefined)}>Cancel</button>
                </form>
              ) : (
                <p class="content">{entry.content}</p>
              )}
              <div class="actions">
                <button onClick={() => setEditing({ id: entry.id, content: entry.content })} aria-label={`Edit ${entry.key}`}>Edit</button>
                <button class="danger" onClick={() => void post('/api/console/memory/forget', { id: entry.id }, `Forgot ${entry.key}`)} aria-label={`Forget ${entry.key}`}>Forget</button>
              </div>
            </li>
          ))}
        </ul>
      )}
      <h2>Add a shared memory</h2>
      <form class="toolbar" onSubmit={(e) => { e.preventDefault(); if (shared.trim()) void post('/api/console/memory/add-shared', { content: shared }, 'Shared memory added').then(() => setShared('')); }}>
        <label for="shared" class="sr">Shared memory</label>
        <input id="shared" value={shared} onInput={(e) => setShared(e.currentTarget.value)} placeholder="Something every conversation may recall" />
        <button type="submit">Add</button>
      </form>
      {data ? <p class="muted small">Backend: {data.backend}</p> : null}
    </>
  );
}
