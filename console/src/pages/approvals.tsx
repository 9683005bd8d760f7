import { useEffect, useState } from 'preact/hooks';
import { ago, api } from '../api.ts';

interface Approval {
  conversation: string;
  channel: string;
  senderId: string;
  createdAt: number;
  calls: Array<{ tool: string; summary: string; args: unknown }>;
}

export function ApprovalsPage() {
  const [rows, setRows] = useState<Approval[] | undefined>(undefined);
  const [message, setMessage] = useState('');
  const load = (): void => void api<{ approvals: Approval[] }>('/api/console/approvals').then((r) => setRows(r.approvals)).catch((e: Error) => setMessage(e.message));
  useEffect(() => {
    load();
    const timer = setInterval(load, 3000);
    return () => clearInterval(timer);
  }, []);
  const deny = async (conversation: string): Promise<void> => {
    try {
      await api('/api/console/approvals/deny', { method: 'POST', body: { conversation } });
      setMessage(`Denied: the question in ${conversation} is withdrawn`);
    } catch (e) {
      setMessage((e as Error).message);
    }
    load();
  };
  if (!rows) return <p class="muted">Loading…</p>;
  return (
    <>
      <p class="muted">Risky tool calls wait for the person who asked to answer yes, no or always on their chat. Approving stays with them; here you can deny, or let the question expire (24 h).</p>
      <p role="status" class={message ? 'notice' : 'sr'}>{message}</p>
      {rows.length === 0 ? <p class="muted">No tool call is waiting for approval.</p> : null}
      <ul class="cards wide">
        {rows.map((row) => (
          <li class="card" data-conversation={row.conversation}>
            <div class="card-head"><strong>{row.senderId}</strong><span class="muted">{row.channel} · {ago(row.createdAt)}</span></div>
            <p class="small muted">{row.conversation}</p>
            {row.calls.map((call) => (
              <div class="call">
                <p>Would run <code>{call.summary || call.tool}</code></p>
                <details><summary>Arguments</summary><pre>{JSON.stringify(call.args, null, 2)}</pre></details>
              </div>
            ))}
            <button class="danger" onClick={() => void deny(row.conversation)} aria-label={`Deny the tool call asked by ${row.senderId}`}>Deny</button>
          </li>
        ))}
      </ul>
    </>
  );
}
