import { useEffect, useState } from 'preact/hooks';
import { api, ApiError } from '../api.ts';

interface Reload {
  ok: boolean;
  restarted?: string[];
  added?: string[];
  removed?: string[];
  agentRebuilt?: boolean;
  needsRestart?: string[];
  error?: string;
}

function describe(result: Reload): string {
  if (!result.ok) return result.error ?? 'the reload was refused';
  const parts = [
    result.restarted?.length ? `restarted ${result.restarted.join(', ')}` : '',
    result.added?.length ? `added ${result.added.join(', ')}` : '',
    result.removed?.length ? `removed ${result.removed.join(', ')}` : '',
    result.agentRebuilt ? 'the agent was rebuilt for the next turn' : '',
  ].filter(Boolean);
  const restart = result.needsRestart?.length ? ` Needs a restart to apply: ${result.needsRestart.join(', ')}.` : '';
  return `Reloaded${parts.length ? `: ${parts.join('; ')}` : ' (nothing changed)'}.${restart}`;
}

export function ConfigPage() {
  const [file, setFile] = useState('');
  const [text, setText] = useState('');
  const [effective, setEffective] = useState<unknown>(undefined);
  const [problems, setProblems] = useState<string[]>([]);
  const [message, setMessage] = useState('');
  const [busy, setBusy] = useState(false);
  const load = (): void =>
    void api<{ file: string; text: string; effective: unknown }>('/api/console/config')
      .then((r) => {
        setFile(r.file);
        setText(r.text);
        setEffective(r.effective);
      })
      .catch((e: Error) => setMessage(e.message));
  useEffect(load, []);
  const run = async (what: 'validate' | 'save' | 'reload'): Promise<void> => {
    setBusy(true);
    setMessage('');
    setProblems([]);
    try {
      if (what === 'validate') {
        const r = await api<{ ok: boolean; problems: string[] }>('/api/console/config/validate', { method: 'POST', body: { text } });
        setProblems(r.problems);
        setMessage(r.ok ? 'Valid.' : 'Not valid:');
      } else if (what === 'save') {
        const r = await api<{ ok: boolean; reload: Reload }>('/api/console/config/save', { method: 'POST', body: { text } });
        setMessage(`Saved (the old file is ${file}.bak). ${describe(r.reload)}`);
        load();
      } else {
        setMessage(describe(await api<Reload>('/api/console/config/reload', { method: 'POST' })));
        load();
      }
    } catch (e) {
      const body = (e as ApiError & { body?: { problems?: string[]; error?: string } }).body;
      if (body?.problems) {
        setProblems(body.problems.map((p) => (typeof p === 'string' ? p : JSON.stringify(p))));
        setMessage('Not saved: the file is not valid.');
      } else setMessage((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <p class="muted">{file}. Secrets written in the file show as •••••••• and are kept when you save; <code>{'${NAME}'}</code> references are shown as they are.</p>
      <label for="config-text" class="sr">Config file</label>
      <textarea id="config-text" class="code" rows={24} spellcheck={false} value={text} onInput={(e) => setText(e.currentTarget.value)} />
      <div class="toolbar">
        <button disabled={busy} onClick={() => void run('validate')}>Validate</button>
        <button disabled={busy} class="primary" onClick={() => void run('save')}>Save and reload</button>
        <button disabled={busy} onClick={() => void run('reload')}>Reload the file as it is</button>
      </div>
      <div role="status" aria-live="polite">
        {message ? <p class="notice" data-testid="config-message">{message}</p> : null}
        {problems.length ? <pre class="problems">{problems.join('\n')}</pre> : null}
      </div>
      <details>
        <summary>Effective config (secrets masked)</summary>
        <pre>{JSON.stringify(effective, null, 2)}</pre>
      </details>
    </>
  );
}
