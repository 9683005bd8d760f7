import { useEffect, useState } from 'preact/hooks';
import { ago, api, postAction } from '../api.ts';

interface Access {
  pending: Array<{ channel: string; senderId: string; code: string; createdAt: number }>;
  approved: Array<{ channel: string; senderId: string; approvedAt: number }>;
  allow: Record<string, string[] | null>;
}

export function AccessPage() {
  const [data, setData] = useState<Access | undefined>(undefined);
  const [message, setMessage] = useState('');
  const load = (): void => void api<Access>('/api/console/access').then(setData).catch((e: Error) => setMessage(e.message));
  useEffect(() => {
    load();
    const timer = setInterval(load, 3000);
    return () => clearInterval(timer);
  }, []);
  const act = (path: string, body: unknown, done: string): Promise<void> => postAction(path, body, done, setMessage, load);
  if (!data) return <p class="muted">Loading…</p>;
  return (
    <>
      <p role="status" class={message ? 'notice' : 'sr'}>{message}</p>
      <h2>Pending pairing codes</h2>
      {data.pending.length === 0 ? <p class="muted">No one is waiting. A stranger's first direct message gets a code; it shows here for an hour.</p> : (
        <table>
          <thead><tr><th>Channel</th><th>Sender</th><th>Code</th><th>Asked</th><th><span class="sr">Actions</span></th></tr></thead>
          <tbody>
            {data.pending.map((p) => (
              <tr data-code={p.code}>
                <td>{p.channel}</td><td>{p.senderId}</td><td><code>{p.code}</code></td><td>{ago(p.createdAt)}</td>
                <td class="actions">
                  <button class="primary" aria-label={`Approve ${p.senderId} on ${p.channel}`} onClick={() => void act('/api/console/pairing/approve', { channel: p.channel, code: p.code }, `Approved ${p.senderId} on ${p.channel}`)}>Approve</button>
                  <button aria-label={`Deny ${p.senderId} on ${p.channel}`} onClick={() => void act('/api/console/pairing/deny', { channel: p.channel, code: p.code }, `Denied code ${p.code}`)}>Deny</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Approved senders</h2>
      {data.approved.length === 0 ? <p class="muted">None yet.</p> : (
        <table>
          <thead><tr><th>Channel</th><th>Sender</th><th>Approved</th><th><span class="sr">Actions</span></th></tr></thead>
          <tbody>
            {data.approved.map((a) => (
              <tr>
                <td>{a.channel}</td><td>{a.senderId}</td><td>{ago(a.approvedAt)}</td>
                <td class="actions"><button aria-label={`Revoke ${a.senderId} on ${a.channel}`} onClick={() => void act('/api/console/access/revoke', { channel: a.channel, senderId: a.senderId }, `Revoked ${a.senderId}`)}>Revoke</button></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Allow lists (from the config, read-only)</h2>
      <dl class="allow">
        {Object.entries(data.allow).map(([channel, allow]) => (
          <>
            <dt>{channel}</dt>
            <dd>{allow === null ? 'pairing (no allow list): strangers get a code to approve here' : allow.join(', ') || '(nobody)'}</dd>
          </>
        ))}
      </dl>
    </>
  );
}
