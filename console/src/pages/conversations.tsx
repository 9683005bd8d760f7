import { useEffect, useState } from 'preact/hooks';
import { ago, api } from '../api.ts';
import { Markdown } from '../markdown.tsx';

interface Row { conversation: string; channel: string; people: string[]; messages: number; lastAt: number; lastLine: string }
interface Hit { conversation: string; turn: number; at: number; role: string; snippet: string }
type Message =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: Array<{ id: string; name: string; arguments: string }> }
  | { role: 'tool'; toolCallId: string; name: string; content: string };
interface Entry { turn: number; at: number; message: Message; sender?: string }
interface Recall { at: number; query: string; entries: Array<{ id: string; key: string; content: string; scope: string; score?: number }> }

function Transcript({ conversation, onBack }: { conversation: string; onBack: () => void }) {
  const [data, setData] = useState<{ entries: Entry[]; recalls: Recall[] } | undefined>(undefined);
  useEffect(() => void api<{ entries: Entry[]; recalls: Recall[] }>(`/api/console/transcript?c=${encodeURIComponent(conversation)}`).then(setData), [conversation]);
  if (!data) return <p class="muted">Loading…</p>;
  const turns = [...new Set(data.entries.map((e) => e.turn))];
  const results = new Map(data.entries.filter((e) => e.message.role === 'tool').map((e) => [(e.message as { toolCallId: string }).toolCallId, e.message as { content: string }]));
  let previousEnd = 0;
  return (
    <>
      <button onClick={onBack}>← All conversations</button>
      <h2>{conversation}</h2>
      <ol class="transcript">
        {turns.map((turn) => {
          const entries = data.entries.filter((e) => e.turn === turn);
          const end = Math.max(...entries.map((e) => e.at));
          const recalls = data.recalls.filter((r) => r.at > previousEnd && r.at <= end && r.entries.length > 0);
          previousEnd = end;
          return (
            <li class="turn">
              {recalls.length ? (
                <details class="recall">
                  <summary>{((n) => `Recalled ${n} ${n === 1 ? 'memory' : 'memories'} for this turn`)(recalls.reduce((n, r) => n + r.entries.length, 0))}</summary>
                  <ul>{recalls.flatMap((r) => r.entries.map((m) => <li><code>{m.key}</code> ({m.scope}{m.score !== undefined ? `, ${m.score.toFixed(2)}` : ''}): {m.content}</li>))}</ul>
                </details>
              ) : null}
              {entries.map((e) => {
                const m = e.message;
                if (m.role === 'user') return <div class="bubble user"><p class="who small">{e.sender ?? 'person'} · {ago(e.at)}</p><p class="plain">{m.content}</p></div>;
                if (m.role === 'assistant')
                  return (
                    <div class="bubble assistant">
                      {m.content ? <Markdown text={m.content} /> : null}
                      {m.toolCalls?.map((call) => (
                        <details class="tool">
                          <summary>Tool call: <code>{call.name}</code></summary>
                          <p class="small">Arguments</p>
                          <pre>{call.arguments}</pre>
                          <p class="small">Result</p>
                          <pre>{results.get(call.id)?.content ?? '(none)'}</pre>
                        </details>
                      ))}
                    </div>
                  );
                return null;
              })}
            </li>
          );
        })}
      </ol>
    </>
  );
}

const openParam = (): string | undefined => new URLSearchParams(location.hash.split('?')[1] ?? '').get('c') ?? undefined;

export function ConversationsPage() {
  const [rows, setRows] = useState<Row[] | undefined>(undefined);
  const [hits, setHits] = useState<Hit[] | undefined>(undefined);
  const [q, setQ] = useState('');
  // The open transcript is in the address (#/conversations?c=KEY): linkable, and Back returns to the list.
  const [open, setOpenState] = useState<string | undefined>(openParam());
  useEffect(() => {
    const onHash = (): void => setOpenState(openParam());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  const setOpen = (conversation: string | undefined): void => {
    location.hash = conversation === undefined ? '#/conversations' : `#/conversations?c=${encodeURIComponent(conversation)}`;
  };
  useEffect(() => void api<{ conversations: Row[] }>('/api/console/conversations').then((r) => setRows(r.conversations)), [open]);
  const search = (event: Event): void => {
    event.preventDefault();
    if (!q.trim()) return setHits(undefined);
    void api<{ hits: Hit[] }>(`/api/console/conversations?q=${encodeURIComponent(q.trim())}`).then((r) => setHits(r.hits));
  };
  if (open) return <Transcript conversation={open} onBack={() => setOpen(undefined)} />;
  return (
    <>
      <form class="toolbar" onSubmit={search} role="search">
        <label for="conv-q">Search history</label>
        <input id="conv-q" type="search" value={q} onInput={(e) => setQ(e.currentTarget.value)} />
        <button type="submit">Search</button>
      </form>
      {hits ? (
        <ul class="hits">
          {hits.length === 0 ? <li class="muted">No message contains that.</li> : null}
          {hits.map((h) => <li><button class="link" onClick={() => setOpen(h.conversation)}>{h.conversation}</button> <span class="muted small">{h.role} · {ago(h.at)}</span><p>{h.snippet}</p></li>)}
        </ul>
      ) : null}
      {!rows ? <p class="muted">Loading…</p> : rows.length === 0 ? <p class="muted">No conversations yet.</p> : (
        <table>
          <thead><tr><th>Conversation</th><th>Channel</th><th>People</th><th>Messages</th><th>Last</th></tr></thead>
          <tbody>
            {rows.map((r) => (
              <tr>
                <td><button class="link" onClick={() => setOpen(r.conversation)}>{r.conversation}</button><p class="small muted clip">{r.lastLine}</p></td>
                <td>{r.channel}</td><td>{r.people.join(', ')}</td><td>{r.messages}</td><td>{ago(r.lastAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
