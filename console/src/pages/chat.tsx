import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { LiveContext, type ChatEvent } from '../live.ts';
import { Markdown } from '../markdown.tsx';

interface Line {
  id: string;
  role: 'user' | 'assistant';
  text: string;
  streaming?: boolean;
  /** A message of yours whose post failed (it may still have arrived): Send tries it again, as the same message. */
  unsent?: boolean;
  file?: { name: string; url: string; image?: { width: number; height: number } };
}

const maxFileBytes = 8 * 1024 * 1024;

function base64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error ?? new Error('could not read the file'));
    reader.readAsDataURL(file);
  });
}

/** A random id for one message (base64url of 12 random bytes). */
function newMessageId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function ChatPage() {
  const live = useContext(LiveContext);
  const [lines, setLines] = useState<Line[]>([]);
  const [text, setText] = useState('');
  const [files, setFiles] = useState<File[]>([]);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const end = useRef<HTMLDivElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  /** The message being sent and its id, until it has gone through. */
  const pending = useRef<{ key: string; id: string } | undefined>(undefined);
  // A streamed reply is finished when it stops changing: the last edit carries the final text.
  const settle = useRef(new Map<string, ReturnType<typeof setTimeout>>());

  useEffect(() => {
    api<{ messages: Array<{ role: 'user' | 'assistant'; text: string; at: number }> }>('/api/console/chat/history')
      .then(({ messages }) => setLines((current) => [...messages.map((m, i) => ({ id: `h${i}`, role: m.role, text: m.text })), ...current]))
      .catch((e: Error) => setError(e.message));
    return live.onChat((event: ChatEvent) => {
      if (event.type === 'draft') {
        clearTimeout(settle.current.get(event.id));
        settle.current.set(
          event.id,
          setTimeout(() => {
            settle.current.delete(event.id);
            setLines((current) => current.map((line) => (line.id === event.id ? { ...line, streaming: false } : line)));
          }, 1200),
        );
      }
      setLines((current) => {
        if (event.type === 'file') return [...current, { id: event.id, role: 'assistant', text: '', file: { name: event.name, url: event.url, ...(event.image ? { image: event.image } : {}) } }];
        const at = current.findIndex((line) => line.id === event.id);
        const line: Line = { id: event.id, role: 'assistant', text: event.text, streaming: event.type === 'draft' };
        if (at < 0) return [...current.map((l) => ({ ...l, streaming: false })), line];
        const next = [...current];
        next[at] = line;
        return next;
      });
    });
  }, []);
  useEffect(() => end.current?.scrollIntoView({ block: 'end' }), [lines]);

  const send = async (event?: Event): Promise<void> => {
    event?.preventDefault();
    if (busy || (text.trim() === '' && files.length === 0)) return;
    setError('');
    const tooBig = files.find((f) => f.size > maxFileBytes);
    if (tooBig) {
      setError(`${tooBig.name} is larger than 8 MB`);
      return;
    }
    setBusy(true);
    try {
      const payload = await Promise.all(files.map(async (f) => ({ name: f.name, mime: f.type || 'application/octet-stream', data: await base64(f) })));
      // One id per message, kept while it has not gone through: sending it again after an error is
      // the same message, so one the server stored though the answer was lost is not answered twice.
      const key = `${text}\u0000${files.map((f) => `${f.name}/${f.size}`).join('\u0000')}`;
      if (pending.current?.key !== key) pending.current = { key, id: newMessageId() };
      const id = pending.current.id;
      // Drawn before it is posted: its reply may reach the page (over the event stream) before
      // the post's answer does — a command's comes at once — and a reply goes below what it answers.
      const mine: Line = { id: `u-${id}`, role: 'user', text: text + (files.length ? `\n\n(${files.map((f) => f.name).join(', ')})` : '') };
      setLines((current) => (current.some((line) => line.id === mine.id) ? current.map((line) => (line.id === mine.id ? mine : line)) : [...current, mine]));
      try {
        await api('/api/console/chat', { method: 'POST', body: { text, files: payload, id } });
      } catch (failure) {
        setLines((current) => current.map((line) => (line.id === mine.id ? { ...line, unsent: true } : line)));
        throw failure;
      }
      pending.current = undefined;
      setText('');
      setFiles([]);
      if (fileInput.current) fileInput.current.value = '';
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <div class="chat">
      <ol class="messages" aria-live="polite" aria-label="Conversation">
        {lines.length === 0 ? <li class="muted">Say hello to the agent. Your conversation is kept like any channel’s.</li> : null}
        {lines.map((line) => (
          <li class={`bubble ${line.role}${line.streaming ? ' streaming' : ''}${line.unsent ? ' unsent' : ''}`} data-role={line.role}>
            {line.file?.image ? (
              <figure class="picture">
                <img src={line.file.url} alt={line.file.name} width={line.file.image.width} height={line.file.image.height} />
                <figcaption>
                  <a href={line.file.url} download={line.file.name}>{line.file.name}</a>
                </figcaption>
              </figure>
            ) : line.file ? (
              <a href={line.file.url} download={line.file.name}>File: {line.file.name}</a>
            ) : line.role === 'assistant' ? (
              <Markdown text={line.text} />
            ) : (
              <p class="plain">{line.text}</p>
            )}
            {line.unsent ? <p class="small muted">Not confirmed sent: Send tries again.</p> : null}
          </li>
        ))}
        <div ref={end} />
      </ol>
      <form class="composer" onSubmit={(e) => void send(e)}>
        <label for="chat-text" class="sr">Message</label>
        <textarea
          id="chat-text"
          rows={2}
          placeholder="Message the agent (Enter sends, Shift+Enter for a new line)"
          value={text}
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              void send();
            }
          }}
        />
        <div class="composer-actions">
          <label class="file-button">
            Attach
            <input ref={fileInput} type="file" multiple class="sr" onChange={(e) => setFiles([...(e.currentTarget.files ?? [])])} />
          </label>
          {files.length ? <span class="small">{files.map((f) => f.name).join(', ')}</span> : null}
          <button type="submit" class="primary" disabled={busy}>Send</button>
        </div>
        {error ? <p class="error" role="alert">{error}</p> : null}
      </form>
    </div>
  );
}
