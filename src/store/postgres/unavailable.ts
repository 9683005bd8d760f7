/**
 * Why PostgreSQL could not be used at start, in one paragraph an operator can act on: the server
 * (without its password), the cause and the fix, and whether waiting can help.
 *
 * `temporary` (exit 75, EX_TEMPFAIL — a service manager tries again later): the server refused
 * or did not answer the connection, is starting or shutting down, or has no connection slot
 * left. Anything else (a wrong password, no such database or role, missing privileges, a schema
 * newer than this Switchboard) is the config's or the database's to fix, and a restart cannot
 * (exit 78, EX_CONFIG). Codes: PostgreSQL's SQLSTATE table
 * (https://www.postgresql.org/docs/15/errcodes-appendix.html) and Node's errno names.
 */

/** EX_TEMPFAIL (sysexits.h): try again later. The systemd unit restarts on it with a back-off. */
export const EXIT_TEMPFAIL = 75;

export type UnavailableCause = 'connection refused' | 'timeout' | 'host not found' | 'server starting or stopping' | 'too many connections' | 'authentication failed' | 'database missing' | 'role missing' | 'permission denied' | 'schema too new' | 'other';

export class StoreUnavailableError extends Error {
  /** The server without its password, as `redactUrl` prints it. */
  readonly url: string;
  readonly reason: UnavailableCause;
  /** Waiting can help (exit 75); else it needs a fix first (exit 78). */
  readonly temporary: boolean;
  /** The exit code for this failure: 75 when temporary, 78 otherwise. */
  readonly exitCode: number;
  /** What went wrong, without the server's name (e.g. `connection refused: nothing listens on h:5432 (ECONNREFUSED)`). */
  readonly detail: string;
  /** What to do about it. */
  readonly fix: string;

  constructor(url: string, reason: UnavailableCause, detail: string, fix: string, temporary: boolean, cause: unknown) {
    super(
      `cannot use the PostgreSQL database ${url} ([store] url): ${detail}. Fix: ${fix} — ${temporary ? "exit 75: the systemd unit (and Docker's restart policy) tries again later, with a growing pause" : 'exit 78: not retried until the config or the database is fixed; then start again'}.`,
      { cause },
    );
    this.name = 'StoreUnavailableError';
    this.url = url;
    this.reason = reason;
    this.temporary = temporary;
    this.exitCode = temporary ? EXIT_TEMPFAIL : 78;
    this.detail = detail;
    this.fix = fix;
  }
}

/** The first error with a code inside `error` (pg's connect may reject with an AggregateError, one per address). */
function codeOf(error: unknown): { code?: string; message: string } {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current !== null && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return { code, message: (current as Error).message ?? '' };
    const inner = (current as { errors?: unknown[] }).errors?.[0] ?? (current as { cause?: unknown }).cause;
    if (inner === undefined) break;
    current = inner;
  }
  return { message: error instanceof Error ? error.message : String(error) };
}

/** Turns a failure to connect to (or migrate) the database at `url` (already redacted) into a {@link StoreUnavailableError}. */
export function storeUnavailable(url: string, error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  let host = 'the server';
  let user = 'the user';
  let database = 'the database';
  try {
    const parsed = new URL(url);
    host = `${parsed.hostname}:${parsed.port || '5432'}`;
    user = `"${decodeURIComponent(parsed.username) || 'the default user'}"`;
    database = `"${decodeURIComponent(parsed.pathname.slice(1)) || parsed.username}"`;
  } catch {
    // the URL was checked by the config schema; keep the generic words
  }
  const { code, message } = codeOf(error);
  const make = (reason: UnavailableCause, detail: string, fix: string, temporary: boolean): StoreUnavailableError =>
    new StoreUnavailableError(url, reason, `${detail}${code ? ` (${code})` : ''}`, fix, temporary, error);
  switch (code) {
    case 'ECONNREFUSED':
      return make('connection refused', `connection refused: nothing listens on ${host}`, `start PostgreSQL (systemctl start postgresql), or correct the host and port in [store] url`, true);
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ECONNRESET':
      return make('timeout', `no answer from ${host}`, `check that the server is up and that a firewall lets this host reach ${host}`, true);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return make('host not found', `the host name of ${host} does not resolve`, 'check its spelling in [store] url (a name that resolves later, as a container starting, is retried)', true);
    case '57P03':
    case '57P01':
    case '57P02':
      return make('server starting or stopping', `the server at ${host} is starting up or shutting down`, 'wait for it to be up', true);
    case '53300':
      return make('too many connections', `the server at ${host} has no connection slot left`, 'raise its max_connections or lower [store] max_connections on the nodes', true);
    case '28P01':
      return make('authentication failed', `the server refused the password of user ${user}`, `put the role's password in [store] url (e.g. url = "postgres://switchboard:\${PGPASSWORD}@…" with PGPASSWORD in the environment), or set it: ALTER ROLE … PASSWORD '…'`, false);
    case '28000':
      if (/role .* does not exist/.test(message)) return make('role missing', message, `create it: createuser --pwprompt ${user.replace(/"/g, '')} (docs/cluster.md)`, false);
      return make('authentication failed', `the server does not let user ${user} in from this host (${message})`, `add a line for this host to the server's pg_hba.conf (host ${database.replace(/"/g, '')} ${user.replace(/"/g, '')} <this host>/32 scram-sha-256) and reload it, or check the user name in [store] url`, false);
    case '3D000':
      return make('database missing', `the database ${database} does not exist`, `create it: createdb --owner=${user.replace(/"/g, '')} ${database.replace(/"/g, '')} (docs/cluster.md)`, false);
    case '42501':
      return make('permission denied', `user ${user} may not create Switchboard's tables or its queue's schema (${message})`, `make it the database's owner (ALTER DATABASE ${database.replace(/"/g, '')} OWNER TO ${user.replace(/"/g, '')}), or GRANT CONNECT, CREATE ON DATABASE ${database.replace(/"/g, '')} TO ${user.replace(/"/g, '')}; GRANT USAGE, CREATE ON SCHEMA public TO ${user.replace(/"/g, '')} (docs/cluster.md)`, false);
    default:
      break;
  }
  if (/timeout|timed out|Connection terminated/i.test(message)) {
    return make('timeout', `no answer from ${host} in time (${message})`, `check that the server is up and that a firewall lets this host reach ${host}`, true);
  }
  if (/schema version \d+ is newer/.test(message)) return make('schema too new', message, 'upgrade every node to the same version', false);
  if (/role .* does not exist/.test(message)) return make('role missing', message, `create it: createuser --pwprompt ${user.replace(/"/g, '')}`, false);
  return make('other', message, 'check [store] url and the server\'s log', false);
}
