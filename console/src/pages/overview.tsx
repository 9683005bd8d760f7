import { useContext, useState } from 'preact/hooks';
import { ago, api, duration } from '../api.ts';
import { Chart } from '../chart.tsx';
import { LiveContext, type ActivityMinute } from '../live.ts';

/** 60 points, one a minute, oldest first (minutes without activity are 0). */
function perMinute(activity: readonly ActivityMinute[], pick: (m: ActivityMinute) => number | undefined, empty: number | undefined): Array<number | undefined> {
  const now = Math.floor(Date.now() / 60_000) * 60_000;
  const byAt = new Map(activity.map((m) => [m.at, m]));
  return Array.from({ length: 60 }, (_, i) => {
    const minute = byAt.get(now - (59 - i) * 60_000);
    return minute ? pick(minute) : empty;
  });
}

export function OverviewPage() {
  const { overview } = useContext(LiveContext);
  const [message, setMessage] = useState('');
  if (!overview) return <p class="muted">Waiting for the daemon…</p>;
  const { status, activity } = overview;
  const restart = async (name: string): Promise<void> => {
    setMessage('');
    try {
      await api('/api/console/channels/restart', { method: 'POST', body: { name } });
      setMessage(`${name}: restarting`);
    } catch (e) {
      setMessage(`${name}: ${(e as Error).message}`);
    }
  };
  return (
    <>
      <section aria-label="Daemon" class="stats">
        <div><span class="label">Uptime</span><span class="value">{duration(status.uptimeSeconds)}</span></div>
        <div><span class="label">Version</span><span class="value">{status.version ?? '?'}</span></div>
        <div><span class="label">Model</span><span class="value">{overview.model}</span></div>
        <div><span class="label">Queued</span><span class="value" data-testid="queued">{status.queued}</span></div>
        <div><span class="label">In flight</span><span class="value">{status.inFlight}</span></div>
        <div><span class="label">Replies pending</span><span class="value">{status.pendingReplies}</span></div>
      </section>
      {status.storage ? <p class="error" role="alert">The data_dir's disk is full since {ago(status.storage.since)} ({status.storage.code}): new messages are refused.</p> : null}
      <h2>Channels</h2>
      <p class="sr" role="status">{message}</p>
      {message ? <p class="notice">{message}</p> : null}
      <ul class="cards">
        {status.channels.map((channel) => (
          <li class="card" data-channel={channel.name}>
            <div class="card-head">
              <strong>{channel.name}</strong>
              <span class={`badge ${channel.state}`}>{channel.state}</span>
            </div>
            <dl>
              <dt>for</dt><dd>{ago(channel.since).replace(' ago', '')}</dd>
              <dt>restarts</dt><dd>{channel.restarts}</dd>
              <dt>last message in</dt><dd>{ago(channel.lastInboundAt)}</dd>
            </dl>
            {channel.lastError ? <p class="error small">last error {ago(channel.lastErrorAt)}: {channel.lastError}</p> : null}
            {channel.notes?.map((note) => <p class="note small">{note}</p>)}
            <button onClick={() => void restart(channel.name)} aria-label={`Restart ${channel.name}`}>Restart</button>
          </li>
        ))}
      </ul>
      <h2>Last hour</h2>
      <div class="charts">
        <Chart title="Messages per minute" series={[
          { name: 'in', values: perMinute(activity, (m) => m.received, 0), className: 's1' },
          { name: 'out', values: perMinute(activity, (m) => m.sent, 0), className: 's2' },
        ]} />
        <Chart title="Turn latency" unit=" s" series={[
          { name: 'p50', values: perMinute(activity, (m) => (m.p50 === undefined ? undefined : m.p50 / 1000), undefined), className: 's1' },
          { name: 'p95', values: perMinute(activity, (m) => (m.p95 === undefined ? undefined : m.p95 / 1000), undefined), className: 's3' },
        ]} />
        <Chart title="Provider errors" series={[{ name: 'errors', values: perMinute(activity, (m) => m.providerErrors, 0), className: 's3' }]} />
      </div>
      <h2>Since start</h2>
      <p class="totals">{Object.entries(status.totals).map(([k, v]) => `${v} ${k}`).join(' · ')}</p>
      <h2>Nodes</h2>
      <p>{overview.node} · pid {status.pid} · started {new Date(status.startedAt).toLocaleString()}</p>
      {status.cluster ? (
        <table aria-label="Cluster nodes">
          <thead>
            <tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">Holds</th><th scope="col">In flight</th><th scope="col">Turns</th><th scope="col">Version</th></tr>
          </thead>
          <tbody>
            {status.cluster.nodes.map((node) => (
              <tr data-node={node.node}>
                <td>{node.node}{node.node === status.cluster!.node ? ' (this one)' : ''}</td>
                <td><span class={`badge ${node.alive ? 'running' : 'stopped'}`}>{node.alive ? 'alive' : `gone, last seen ${ago(node.seenAt)}`}</span></td>
                <td>{node.channels.join(', ') || '—'}</td>
                <td>{node.inFlight}</td>
                <td>{node.turns}</td>
                <td>{node.version}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </>
  );
}
