import { useContext, useEffect, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { LiveContext, type LogLine } from '../live.ts';

const levels: Array<[number, string]> = [[10, 'trace'], [20, 'debug'], [30, 'info'], [40, 'warn'], [50, 'error'], [60, 'fatal']];
const levelName = (level: number): string => levels.find(([n]) => n === level)?.[1] ?? String(level);
const maxLines = 1000;

export function LogsPage() {
  const live = useContext(LiveContext);
  const [lines, setLines] = useState<LogLine[]>([]);
  const [min, setMin] = useState(20);
  const [channel, setChannel] = useState('');
  const [paused, setPaused] = useState(false);
  useEffect(() => {
    void api<{ lines: LogLine[] }>('/api/console/logs').then((r) => setLines((current) => [...r.lines, ...current.filter((l) => l.seq > (r.lines.at(-1)?.seq ?? 0))]));
  }, []);
  useEffect(() => {
    if (paused) return undefined;
    return live.onLog((line) => setLines((current) => (current.some((l) => l.seq === line.seq) ? current : [...current, line].slice(-maxLines))));
  }, [paused]);
  const channels = [...new Set(lines.map((l) => l.channel).filter((c): c is string => c !== undefined))].sort();
  const shown = lines.filter((l) => l.level >= min && (channel === '' || l.channel === channel)).slice(-300).reverse();
  return (
    <>
      <div class="toolbar">
        <label for="log-level">Level</label>
        <select id="log-level" value={String(min)} onChange={(e) => setMin(Number(e.currentTarget.value))}>
          {levels.map(([n, name]) => <option value={String(n)}>{name} and above</option>)}
        </select>
        <label for="log-channel">Channel</label>
        <select id="log-channel" value={channel} onChange={(e) => setChannel(e.currentTarget.value)}>
          <option value="">all</option>
          {channels.map((c) => <option value={c}>{c}</option>)}
        </select>
        <button onClick={() => setPaused(!paused)} aria-pressed={paused}>{paused ? 'Resume' : 'Pause'}</button>
      </div>
      <p class="muted small">Newest first. Secrets are redacted as in the log file. The daemon logs at its configured level; lines below it never exist.</p>
      <ol class="logs" aria-label="Log lines">
        {shown.map((l) => (
          <li class={`log lvl-${levelName(l.level)}`}>
            <details>
              <summary>
                <time>{new Date(l.time).toLocaleTimeString()}</time> <span class="lvl">{levelName(l.level)}</span> {l.channel ? <span class="chan">{l.channel}</span> : null} {l.msg}
              </summary>
              <pre>{l.line}</pre>
            </details>
          </li>
        ))}
      </ol>
    </>
  );
}
