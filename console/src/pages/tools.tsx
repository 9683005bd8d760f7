import { useEffect, useState } from 'preact/hooks';
import { ago, api } from '../api.ts';

interface Tools {
  tools: Array<{ name: string; description: string; source: string }>;
  clients: string[];
  calls: Array<{ tool: string; outcome: string; ms?: number; at: number }>;
}

export function ToolsPage() {
  const [data, setData] = useState<Tools | undefined>(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    const load = (): void => void api<Tools>('/api/console/tools').then(setData).catch((e: Error) => setError(e.message));
    load();
    const timer = setInterval(load, 5000);
    return () => clearInterval(timer);
  }, []);
  if (error) return <p class="error" role="alert">{error}</p>;
  if (!data) return <p class="muted">Loading…</p>;
  return (
    <>
      <h2>Offered to the model ({data.tools.length})</h2>
      <table>
        <thead><tr><th>Tool</th><th>Source</th><th>Description</th></tr></thead>
        <tbody>{data.tools.map((t) => <tr><td><code>{t.name}</code></td><td class="nowrap">{t.source}</td><td class="small">{t.description}</td></tr>)}</tbody>
      </table>
      <h2>Connected remote clients</h2>
      {data.clients.length === 0 ? <p class="muted">None connected.</p> : <ul>{data.clients.map((c) => <li>{c}</li>)}</ul>}
      <h2>Recent calls</h2>
      {data.calls.length === 0 ? <p class="muted">No tool calls since start.</p> : (
        <table>
          <thead><tr><th>Tool</th><th>Outcome</th><th>Duration</th><th>When</th></tr></thead>
          <tbody>{data.calls.map((c) => <tr><td><code>{c.tool}</code></td><td><span class={`badge ${c.outcome}`}>{c.outcome}</span></td><td>{c.ms === undefined ? '–' : `${c.ms} ms`}</td><td>{ago(c.at)}</td></tr>)}</tbody>
        </table>
      )}
    </>
  );
}
